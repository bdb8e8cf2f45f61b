// Rendering a QuantizeReport (quantize_report.hpp).
#include "libaff/quant/quantize_report.hpp"

#include "libaff/core/units.hpp"

#include <cstdio>

namespace aff::quant {

namespace {
double bits_per_weight(const QuantizeReport& r) {
    return r.expert_weights ? 8.0 * static_cast<double>(r.expert_bytes) / static_cast<double>(r.expert_weights) : 0.0;
}
}  // namespace

std::string summary_line(const QuantizeReport& r, const std::string& out) {
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, "%.3f bits a weight, %llu of %llu matrices rotated, NMSE %.4f (worst %.4f, ",
                  bits_per_weight(r), static_cast<unsigned long long>(r.rotated_matrices),
                  static_cast<unsigned long long>(r.matrices), r.nmse, r.worst_nmse);
    return "wrote " + out + " (" + format_bytes(r.file_bytes) + "): " + std::to_string(r.experts) + " experts at " +
           numbers + (r.worst_matrix.empty() ? "none" : r.worst_matrix) + "); " + std::to_string(r.dense_tensors) +
           " tensors copied (" + format_bytes(r.dense_bytes) + ")";
}

nlohmann::json report_json(const QuantizeReport& r, const std::string& out) {
    return {{"out", out},
            {"bytes", r.file_bytes},
            {"codebook_id", r.codebook_id},
            {"dense_tensors", r.dense_tensors},
            {"dense_bytes", r.dense_bytes},
            {"experts", r.experts},
            {"expert_weights", r.expert_weights},
            {"expert_bytes", r.expert_bytes},
            {"bits_per_weight", bits_per_weight(r)},
            {"matrices", r.matrices},
            {"rotated_matrices", r.rotated_matrices},
            {"nmse", r.nmse},
            {"worst_nmse", r.worst_nmse},
            {"worst_matrix", r.worst_matrix}};
}

}  // namespace aff::quant
