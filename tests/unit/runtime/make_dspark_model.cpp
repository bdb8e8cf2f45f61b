// Writes the random tiny DeepSeek-V4 checkpoint with DSpark stages mtp.0..2
// (tests/common/random_dspark_checkpoint.hpp) for the CLI cases that run it
// (tests/cli/*/dspark-*.sh), instead of committing one.
//     aff_make_dspark_model OUT_DIR [SEED]
#include "../../common/random_dspark_checkpoint.hpp"

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr, "usage: aff_make_dspark_model OUT_DIR [SEED]\n");
        return 2;
    }
    try {
        aff::test::write_random_dspark_checkpoint(argv[1], argc == 3 ? std::stoull(argv[2]) : 1);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "aff_make_dspark_model: %s\n", e.what());
        return 1;
    }
    return 0;
}
