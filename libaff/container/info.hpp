// What aff-info reports about a container (formats/container.md §9 names the classes):
// geometry from the config, tensor and extent counts, bytes by class, the experts'
// bits per weight, which optional sections are present, provenance. Computed from the
// directory alone: no tensor byte is read, so it is instant on a 160 GB file.
#pragma once

#include "libaff/container/container.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>

namespace aff {

struct ContainerSummary {
    std::string path;
    std::uint64_t file_size = 0;
    std::uint32_t version = 0;
    std::string role;  // "main", "draft" or "" when unrecorded
    std::uint64_t tensors = 0, main_extents = 0, draft_extents = 0;
    std::uint64_t bytes_routed_expert = 0, bytes_dense = 0, bytes_embedding_head = 0, bytes_draft = 0;
    // Bits per weight of the main stack's routed experts: every byte of their tensors
    // (scales included) over the elements of their ".weight" tensors; 0 when none.
    double expert_bits_per_weight = 0;
    std::uint64_t profile_bytes = 0, tokenizer_bytes = 0, chat_template_bytes = 0, codebook_bytes = 0;
    bool has_profile = false, has_tokenizer = false, has_chat_template = false, has_codebook = false;
    std::optional<std::string> codebook_id;
    nlohmann::json config;      // null when absent
    nlohmann::json provenance;  // null when absent
    nlohmann::json quantiser;   // null when absent
};

ContainerSummary summarize(const Container& c);

// Human summary: one "label  value" line per fact.
void write_summary_text(std::ostream& out, const ContainerSummary& s);
nlohmann::json summary_json(const ContainerSummary& s);

// The directory: one line per tensor (name, type, shape, class, extent, offset, length,
// digest) or a JSON array of the same fields.
void write_tensor_table(std::ostream& out, const Container& c);
nlohmann::json tensor_table_json(const Container& c);

}  // namespace aff
