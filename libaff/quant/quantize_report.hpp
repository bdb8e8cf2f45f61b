// What a quantisation run did, as aff-quantize reports it: counts, sizes and the
// quantisation error over every routed-expert weight (the one-line summary on stderr
// and the --json object of man/aff-quantize.1).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace aff::quant {

struct QuantizeReport {
    std::uint64_t dense_tensors = 0, dense_bytes = 0;
    std::uint64_t experts = 0, expert_weights = 0, expert_bytes = 0;
    std::uint64_t rotated_matrices = 0, matrices = 0;
    double nmse = 0;        // Σ(w − ŵ)² / Σw² over every quantised weight
    double worst_nmse = 0;  // of the worst matrix
    std::string worst_matrix;
    std::uint64_t file_bytes = 0;
    std::string codebook_id;
};

// "wrote m.aff (3.1 MiB): 48 experts at 5.750 bits a weight, …".
std::string summary_line(const QuantizeReport& report, const std::string& out_path);
nlohmann::json report_json(const QuantizeReport& report, const std::string& out_path);

}  // namespace aff::quant
