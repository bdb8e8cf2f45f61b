// Summaries of a container for aff-info (see info.hpp). Reads only the directory.
#include "libaff/container/info.hpp"

#include "libaff/core/hash.hpp"
#include "libaff/core/units.hpp"

#include <cstdio>
#include <sstream>

namespace aff {
namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string bytes_text(std::uint64_t n) {
    return format_bytes(n);
}

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ContainerSummary summarize(const Container& c) {
    ContainerSummary s;
    s.path = c.path();
    s.file_size = c.file_size();
    s.version = c.version();
    if (auto it = c.metadata().find("role"); it != c.metadata().end()) s.role = it->get<std::string>();
    s.tensors = c.tensors().size();
    for (const ExpertExtent& x : c.experts()) (x.key.draft ? s.draft_extents : s.main_extents)++;
    std::uint64_t expert_weights = 0;
    for (const TensorInfo& t : c.tensors()) {
        switch (t.cls) {
            case TensorClass::routed_expert:
                s.bytes_routed_expert += t.length;
                if (ends_with(t.name, ".weight")) expert_weights += t.elements();
                break;
            case TensorClass::dense: s.bytes_dense += t.length; break;
            case TensorClass::embedding_head: s.bytes_embedding_head += t.length; break;
            case TensorClass::draft: s.bytes_draft += t.length; break;
        }
    }
    if (expert_weights > 0)
        s.expert_bits_per_weight = 8.0 * static_cast<double>(s.bytes_routed_expert) / static_cast<double>(expert_weights);
    if (auto b = c.expert_profile()) s.has_profile = true, s.profile_bytes = b->size();
    if (auto b = c.tokenizer_json()) s.has_tokenizer = true, s.tokenizer_bytes = b->size();
    if (auto b = c.chat_template()) s.has_chat_template = true, s.chat_template_bytes = b->size();
    if (auto b = c.codebook()) s.has_codebook = true, s.codebook_bytes = b->size();
    s.codebook_id = c.codebook_id();
    if (const nlohmann::json* cfg = c.config()) s.config = *cfg;
    if (auto it = c.metadata().find("provenance"); it != c.metadata().end()) s.provenance = *it;
    if (auto it = c.metadata().find("quantiser"); it != c.metadata().end()) s.quantiser = *it;
    return s;
}

void write_summary_text(std::ostream& out, const ContainerSummary& s) {
    auto line = [&](const char* label, const std::string& value) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%-15s", label);
        out << buf << value << '\n';
    };
    line("file", s.path + " (" + bytes_text(s.file_size) + ", format version " + std::to_string(s.version) + ")");
    line("role", s.role.empty() ? "not recorded" : s.role);
    if (s.config.is_object()) {
        auto get = [&](const char* key) -> std::string {
            auto it = s.config.find(key);
            return it == s.config.end() ? "?" : it->is_string() ? it->get<std::string>() : it->dump();
        };
        line("model", get("model_type") + ": " + get("num_hidden_layers") + " layers, " + get("n_routed_experts") +
                          " routed experts (top " + get("num_experts_per_tok") + "), hidden " + get("hidden_size") +
                          ", vocab " + get("vocab_size"));
    } else {
        line("model", "no config recorded");
    }
    line("tensors", std::to_string(s.tensors) + " in the directory; expert extents: " + std::to_string(s.main_extents) +
                        " main, " + std::to_string(s.draft_extents) + " draft");
    line("routed experts", bytes_text(s.bytes_routed_expert));
    line("dense", bytes_text(s.bytes_dense));
    line("embed+head", bytes_text(s.bytes_embedding_head));
    line("draft", bytes_text(s.bytes_draft));
    char bpw[32];
    std::snprintf(bpw, sizeof bpw, "%.3f", s.expert_bits_per_weight);
    line("expert bpw", s.main_extents ? std::string(bpw) + " bits per weight (scales included)" : "no routed experts");
    line("profile", s.has_profile ? "present (" + bytes_text(s.profile_bytes) + ")" : "absent");
    line("codebook", s.codebook_id ? *s.codebook_id + (s.has_codebook ? " (embedded, " + bytes_text(s.codebook_bytes) + ")"
                                                                      : " (recorded; made against another container's codebook)")
                                   : "none");
    line("tokenizer", s.has_tokenizer ? "present (" + bytes_text(s.tokenizer_bytes) + ")" : "absent");
    line("chat template", s.has_chat_template ? "present (" + bytes_text(s.chat_template_bytes) + ")" : "absent");
    if (s.provenance.is_object()) {
        auto str = [&](const char* key) -> std::string {
            auto it = s.provenance.find(key);
            return it == s.provenance.end() || it->is_null() ? "" : it->is_string() ? it->get<std::string>() : it->dump();
        };
        std::string p = str("tool").empty() ? "unknown tool" : str("tool");
        if (!str("created").empty()) p += ", created " + str("created");
        auto src = s.provenance.find("sources");
        p += ", " + std::to_string(src != s.provenance.end() && src->is_array() ? src->size() : 0) + " source file(s)";
        auto im = s.provenance.find("imatrix");
        p += im != s.provenance.end() && im->is_object() && im->contains("file") ? ", imatrix " + (*im)["file"].dump() : ", no imatrix";
        line("provenance", p);
    } else {
        line("provenance", "not recorded");
    }
    line("quantiser", s.quantiser.is_null() ? "none (weights as in the source)" : s.quantiser.dump());
}

nlohmann::json summary_json(const ContainerSummary& s) {
    nlohmann::json j = {
        {"file", s.path},
        {"size", s.file_size},
        {"version", s.version},
        {"role", s.role.empty() ? nlohmann::json() : nlohmann::json(s.role)},
        {"config", s.config},
        {"tensors", s.tensors},
        {"expert_extents", {{"main", s.main_extents}, {"draft", s.draft_extents}}},
        {"bytes",
         {{"routed_expert", s.bytes_routed_expert},
          {"dense", s.bytes_dense},
          {"embedding_head", s.bytes_embedding_head},
          {"draft", s.bytes_draft}}},
        {"expert_bits_per_weight", s.main_extents ? nlohmann::json(s.expert_bits_per_weight) : nlohmann::json()},
        {"profile", s.has_profile ? nlohmann::json({{"size", s.profile_bytes}}) : nlohmann::json()},
        {"codebook", s.codebook_id ? nlohmann::json({{"id", *s.codebook_id}, {"embedded", s.has_codebook},
                                                     {"size", s.codebook_bytes}})
                                   : nlohmann::json()},
        {"tokenizer", s.has_tokenizer ? nlohmann::json({{"size", s.tokenizer_bytes}}) : nlohmann::json()},
        {"chat_template", s.has_chat_template ? nlohmann::json({{"size", s.chat_template_bytes}}) : nlohmann::json()},
        {"provenance", s.provenance},
        {"quantiser", s.quantiser},
    };
    return j;
}

void write_tensor_table(std::ostream& out, const Container& c) {
    out << "name\ttype\tshape\tclass\textent\toffset\tlength\txxh3\n";
    for (const TensorInfo& t : c.tensors()) {
        out << t.name << '\t' << to_string(t.type) << '\t' << shape_text(t.shape) << '\t' << to_string(t.cls) << '\t'
            << (t.extent >= 0 ? expert_prefix(c.experts()[static_cast<std::size_t>(t.extent)].key) : "-") << '\t' << t.offset
            << '\t' << t.length << '\t' << to_hex(t.digest) << '\n';
    }
}

nlohmann::json tensor_table_json(const Container& c) {
    nlohmann::json a = nlohmann::json::array();
    for (const TensorInfo& t : c.tensors()) {
        a.push_back({{"name", t.name},
                     {"type", to_string(t.type)},
                     {"shape", t.shape},
                     {"class", to_string(t.cls)},
                     {"extent", t.extent >= 0 ? nlohmann::json(expert_prefix(c.experts()[static_cast<std::size_t>(t.extent)].key))
                                              : nlohmann::json()},
                     {"offset", t.offset},
                     {"length", t.length},
                     {"xxh3", to_hex(t.digest)}});
    }
    return a;
}

}  // namespace aff
