// libFuzzer target: a checkpoint directory (config.json + model.safetensors) as aff-run
// and aff-quantize open it, then the completeness check of libaff/model/completeness.hpp
// (every tensor the config calls for, tid2eid's ids) and, when that passes, the decoding
// of every float weight. Input: 2 bytes (little-endian) giving the config's length, the
// config.json bytes, then the safetensors bytes; both are written to a scratch directory
// of this process. Property: it opens and checks or throws aff::Error, never crashes or
// throws anything else.
#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/core/error.hpp"
#include "libaff/model/completeness.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>

namespace {

// The scratch directory, removed at exit. The string is never destroyed: the exit handler is
// registered while it is being made, so it runs after a static string's destructor would have
// (handlers and destructors run in reverse order of registration), and read a freed string.
const std::string& scratch() {
    static const std::string* const dir = [] {
        const auto d = std::filesystem::temp_directory_path() / ("aff-checkpoint-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        std::atexit([] {
            std::error_code ignored;
            std::filesystem::remove_all(scratch(), ignored);
        });
        return new std::string(d.string());
    }();
    return *dir;
}

void write(const std::string& path, const std::uint8_t* data, std::size_t size) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const std::size_t config_size = std::min<std::size_t>(data[0] | (std::size_t(data[1]) << 8), size - 2);
    write(scratch() + "/config.json", data + 2, config_size);
    write(scratch() + "/model.safetensors", data + 2 + config_size, size - 2 - config_size);
    try {
        const aff::Checkpoint ck(scratch());
        const aff::ModelConfig config = aff::parse_model_config(ck.config_json(), ck.config_path());
        aff::check_checkpoint_complete(ck, ck.config_json());
        for (const std::string& name : ck.names()) {
            const aff::TensorView& v = ck.tensor(name);
            if (v.shape.size() == 2 && v.nbytes <= (1u << 20)) {
                try {
                    ck.read_f32(name, v.shape);
                } catch (const aff::Error&) {
                }
            }
        }
        (void)config;
    } catch (const aff::Error&) {
    }
    return 0;
}
