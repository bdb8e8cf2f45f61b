// Writes every case of the fidelity config sweep (tests/common/v4_sweep.hpp) as a checkpoint
// directory under OUT, plus OUT/cases.json (name, prompt length, storage), for the device oracle
// tests/oracle/fidelity_sweep.py. The CPU test regenerates the same bytes from the case numbers.
//     make_sweep_checkpoints OUT
#include "../common/v4_sweep.hpp"

#include "libaff/core/atomic_file.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_sweep_checkpoints OUT\n");
        return 2;
    }
    try {
        const std::string out = argv[1];
        nlohmann::json cases = nlohmann::json::array();
        for (int i = 0; i < aff::test::kSweepCases; ++i) {
            const aff::test::SweepCase c = aff::test::sweep_case(i);
            aff::test::write_sweep_checkpoint(c, out + "/" + c.name);
            cases.push_back({{"name", c.name}, {"sequence", c.sequence}, {"dense_fp8", c.dense_fp8},
                             {"fp4_experts", c.g.fp4_experts}});
        }
        aff::AtomicFile f(out + "/cases.json");
        const std::string text = cases.dump(1) + "\n";
        f.write(text.data(), text.size());
        f.commit();
        std::printf("%d sweep checkpoints in %s\n", aff::test::kSweepCases, out.c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_sweep_checkpoints: %s\n", e.what());
        return 1;
    }
}
