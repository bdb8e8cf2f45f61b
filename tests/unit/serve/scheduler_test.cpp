// Tests for libaff/serve/scheduler: one holder at a time, first come first served,
// a full queue refused at once, a waiter that gives up leaves no hole.
#include "libaff/serve/scheduler.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using aff::serve::Scheduler;
using namespace std::chrono_literals;

TEST_CASE("the queue is FIFO and bounded", "[serve]") {
    Scheduler s(2);
    Scheduler::Turn first;
    REQUIRE(s.acquire(first, nullptr) == Scheduler::Admission::granted);
    std::mutex m;
    std::vector<int> order;
    std::vector<std::thread> waiters;
    for (int i = 0; i < 2; ++i) {
        waiters.emplace_back([&, i] {
            Scheduler::Turn t;
            CHECK(s.acquire(t, nullptr) == Scheduler::Admission::granted);
            std::lock_guard lock(m);
            order.push_back(i);
        });
        while (s.waiting() != std::size_t(i + 1)) std::this_thread::sleep_for(1ms);
    }
    Scheduler::Turn third;
    CHECK(s.acquire(third, nullptr) == Scheduler::Admission::queue_full);
    CHECK(s.busy());
    first.release();
    for (auto& t : waiters) t.join();
    CHECK(order == std::vector<int>{0, 1});
    CHECK_FALSE(s.busy());
    CHECK(s.waiting() == 0);
}

TEST_CASE("a cancelled waiter gives up its place and the next one runs", "[serve]") {
    Scheduler s(4);
    Scheduler::Turn first;
    REQUIRE(s.acquire(first, nullptr) == Scheduler::Admission::granted);
    std::atomic<bool> give_up{false};
    std::thread quitter([&] {
        Scheduler::Turn t;
        CHECK(s.acquire(t, [&] { return give_up.load(); }) == Scheduler::Admission::cancelled);
    });
    while (s.waiting() != 1) std::this_thread::sleep_for(1ms);
    std::atomic<bool> ran{false};
    std::thread patient([&] {
        Scheduler::Turn t;
        CHECK(s.acquire(t, nullptr) == Scheduler::Admission::granted);
        ran = true;
    });
    while (s.waiting() != 2) std::this_thread::sleep_for(1ms);
    give_up = true;
    quitter.join();
    first.release();
    patient.join();
    CHECK(ran);
}
