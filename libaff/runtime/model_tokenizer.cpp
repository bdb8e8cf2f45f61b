// Tokenizer lookup for a model path (see model_tokenizer.hpp).
#include "libaff/runtime/model_tokenizer.hpp"

#include "libaff/container/container.hpp"
#include "libaff/core/error.hpp"

#include <cerrno>

#include <filesystem>

namespace aff {

std::optional<tokenizer::Tokenizer> load_model_tokenizer(const std::string& model_path,
                                                         const std::string& tokenizer_path) {
    namespace fs = std::filesystem;
    // A model path that is not there is the likelier mistake; say so before anything else.
    std::error_code ec;
    if (!fs::exists(model_path, ec)) throw_errno("cannot open", model_path, ec ? ec.value() : ENOENT);
    if (!tokenizer_path.empty()) return tokenizer::Tokenizer::from_json_file(tokenizer_path);
    if (fs::is_directory(model_path)) {
        const fs::path beside = fs::path(model_path) / "tokenizer.json";
        if (fs::exists(beside)) return tokenizer::Tokenizer::from_json_file(beside.string());
        return std::nullopt;
    }
    if (fs::is_regular_file(model_path)) {
        const Container container = Container::open(model_path);
        if (auto text = container.tokenizer_json()) return tokenizer::Tokenizer::from_json(*text, model_path + " (TOKJ section)");
    }
    return std::nullopt;
}

}  // namespace aff
