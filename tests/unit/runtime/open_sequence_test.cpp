// Tests for the backend choice (libaff/runtime/open_sequence.hpp) on a machine without a GPU, which is
// every CI machine: --gpus 0 and the default give the CPU reference, whose logits are the
// Model's own; --gpus 1 is refused with the reason. A GPU build run where a device is visible
// takes the GPU for the default, so those checks look at what the build and machine have.
#include "libaff/runtime/open_sequence.hpp"

#include "libaff/core/error.hpp"
#include "libaff/core/thread_pool.hpp"

#include "../model/container_fixture.hpp"
#include "../temp_dir.hpp"

#if defined(AFF_HAVE_GPU)
#include "libaff/gpu/device.hpp"
#endif

#include <catch2/catch.hpp>

#include <string>
#include <vector>

TEST_CASE("--gpus 0 runs the CPU reference and gives the model's own logits", "[runtime]") {
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(std::string(AFF_TEST_DATA) + "/models/tiny-b", pool);
    aff::BackendOptions opt;
    opt.gpus = 0;
    auto backend = aff::open_sequence(*model, std::string(AFF_TEST_DATA) + "/models/tiny-b", opt, {});
    CHECK_FALSE(backend->on_gpu());
    CHECK(backend->describe() == "cpu: the reference forward");
    const std::vector<std::int32_t> prompt = {0, 7, 9, 200, 31};
    aff::DecodeState st = model->new_state();
    const std::vector<float> want = model->forward(st, prompt, false);
    CHECK(backend->forward(prompt, false) == want);
    CHECK(backend->position() == 5);
    const std::int32_t one[1] = {42};
    CHECK(backend->forward(one, false) == model->forward(st, one, false));
    CHECK(backend->position() == 6);
}

TEST_CASE("--gpus 1 without a GPU names the reason", "[runtime]") {
    aff::ThreadPool pool(1);
    auto model = aff::Model::load(std::string(AFF_TEST_DATA) + "/models/tiny-b", pool);
    aff::BackendOptions opt;
    opt.gpus = 1;
    if (!aff::gpu_support_built()) {
        try {
            aff::open_sequence(*model, "", opt, {});
            FAIL("no error");
        } catch (const aff::Error& e) {
            CHECK(e.kind() == aff::ErrorKind::usage);
            CHECK(std::string(e.what()) ==
                  "--gpus 1: this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0");
        }
        opt.gpus = -1;  // the default: the CPU
        CHECK_FALSE(aff::open_sequence(*model, "", opt, {})->on_gpu());
    } else {
#if defined(AFF_HAVE_GPU)
        if (aff::gpu::device_count() == 0) {  // a GPU build where no device is visible (CI-like)
            CHECK_THROWS_MATCHES(aff::open_sequence(*model, "", opt, {}), aff::Error,
                                 Catch::Matchers::Predicate<aff::Error>([](const aff::Error& e) {
                                     return e.kind() == aff::ErrorKind::device &&
                                            std::string(e.what()).find("1 GPU(s) asked for, 0 visible") !=
                                                std::string::npos;
                                 }));
            opt.gpus = -1;
            CHECK_FALSE(aff::open_sequence(*model, "", opt, {})->on_gpu());
        }
#endif
    }
}

TEST_CASE("a container opens on the CPU backend with --gpus 0, and reset starts a new sequence", "[runtime]") {
    // The backend takes the model's path, a directory or a container; a quantised
    // container's model runs on the CPU reference with --gpus 0 and gives Model::forward's
    // logits; reset drops the sequence.
    aff::test::TempDir tmp;
    const std::string path = tmp / "q.aff";
    aff::test::FixtureContainerOptions fo;
    fo.experts = aff::test::ExpertStorage::trellis;
    aff::test::write_fixture_container(std::string(AFF_TEST_DATA) + "/models/tiny-b", path, fo);
    aff::ThreadPool pool(2);
    auto model = aff::Model::load(path, pool);
    aff::BackendOptions opt;
    opt.gpus = 0;
    auto backend = aff::open_sequence(*model, path, opt, {});
    CHECK_FALSE(backend->on_gpu());
    const std::vector<std::int32_t> prompt = {0, 7, 9, 200, 31};
    aff::DecodeState st = model->new_state();
    const std::vector<float> want = model->forward(st, prompt, false);
    CHECK(backend->forward(prompt, false) == want);
    CHECK(backend->position() == 5);
    backend->reset();
    CHECK(backend->position() == 0);
    CHECK(backend->forward(prompt, false) == want);
}
