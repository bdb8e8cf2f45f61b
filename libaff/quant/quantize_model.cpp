// quantize_checkpoint: plans the run (quantize_plan.hpp), checks the imatrix against
// the checkpoint (expert_importance.hpp), hashes the sources, then streams the
// container: dense tensors copied from the memory-mapped checkpoint, each routed
// expert dequantised, quantised and written as one extent. Runs one matrix at a time
// with its rows spread over the pool; quantize_matrix's bytes do not depend on the
// thread count and everything else here runs in plan order, so neither does the file.
#include "aff/quant/quantize_model.hpp"

#include "aff/checkpoint/checkpoint.hpp"
#include "aff/container/writer.hpp"
#include "aff/core/error.hpp"
#include "aff/core/mapped_file.hpp"
#include "aff/model/config.hpp"
#include "aff/quant/codebook_source.hpp"
#include "aff/quant/config_truncate.hpp"
#include "aff/quant/expert_importance.hpp"
#include "aff/quant/expert_profile.hpp"
#include "aff/quant/imatrix.hpp"
#include "aff/quant/quantize_plan.hpp"
#include "aff/quant/source_digests.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>

namespace fs = std::filesystem;

namespace aff::quant {

std::string rfc3339_utc(std::int64_t unix_seconds) {
    const std::time_t t = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    if (!gmtime_r(&t, &tm)) throw_usage("time " + std::to_string(unix_seconds) + " is out of range");
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string default_creation_time() {
    if (const char* env = std::getenv("SOURCE_DATE_EPOCH"); env && *env) {
        const std::string text = env;
        if (text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
            throw_usage("SOURCE_DATE_EPOCH='" + text + "' is not a number of seconds");
        return rfc3339_utc(std::stoll(text));
    }
    return rfc3339_utc(std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
}

namespace {

void check_options(const QuantizeOptions& o) {
    if (o.src_dir.empty()) throw_usage("--src DIR is required");
    if (o.out_path.empty()) throw_usage("--out FILE is required");
    if (fs::is_directory(o.out_path)) throw_usage("--out " + o.out_path + " is a directory");
    if (o.draft && o.codebook_path.empty())
        throw_usage("--dspark needs --codebook FILE (the main container or a codebook file)");
    if (!o.draft && !o.codebook_path.empty())
        throw_usage("--codebook is only for --dspark (the main container uses the built-in codebook)");
}

std::string_view rotation_name(Rotation r) {
    switch (r) {
        case Rotation::off: return "off";
        case Rotation::on: return "on";
        case Rotation::automatic: break;
    }
    return "auto";
}

std::string layer_list(const std::vector<int>& layers) {
    std::string s;
    for (int l : layers) s += (s.empty() ? "" : ",") + std::to_string(l);
    return s;
}

// The checkpoint files a run reads, in a fixed order (for provenance).
std::vector<std::string> source_files(const Checkpoint& ck, const std::vector<std::string>& extra) {
    std::vector<std::string> out{ck.config_path()};
    if (ck.tensor_source().ends_with(".index.json")) out.push_back(ck.tensor_source());
    std::set<std::string> shards;
    for (const std::string& name : ck.names()) shards.insert(ck.tensor(name).file);
    out.insert(out.end(), shards.begin(), shards.end());
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
}

std::string read_text(const std::string& path) {
    const MappedFile f(path);
    return f.size() ? std::string(reinterpret_cast<const char*>(f.data()), f.size()) : std::string();
}

struct ErrorSums {
    double error = 0, reference = 0;
};

// Σ(w − ŵ)² and Σw² of a quantised matrix, rows decoded in parallel, summed in row order.
ErrorSums matrix_error(const std::vector<float>& w, std::size_t rows, std::size_t cols,
                       const std::vector<std::uint8_t>& q, bool rotated, const Codebook& cb, ThreadPool& pool) {
    std::vector<ErrorSums> per_row(rows);
    const std::size_t rb = row_bytes(cols);
    pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
        std::vector<float> back(cols);
        for (std::size_t r = begin; r < end; ++r) {
            dequantize_row(std::span(q).subspan(r * rb, rb), cols, rotated, cb, back.data());
            for (std::size_t j = 0; j < cols; ++j) {
                const double x = w[r * cols + j], d = x - back[j];
                per_row[r].error += d * d;
                per_row[r].reference += x * x;
            }
        }
    }, 16);
    ErrorSums s;
    for (const auto& r : per_row) s.error += r.error, s.reference += r.reference;
    return s;
}

}  // namespace

QuantizeReport quantize_checkpoint(const QuantizeOptions& o, ThreadPool& pool, Progress& progress) {
    check_options(o);
    const Checkpoint ck(o.src_dir);
    const ModelConfig mc = parse_model_config(ck.config_json(), ck.config_path());
    const auto source_layers = static_cast<std::uint32_t>(mc.num_layers);
    if (o.layers > source_layers)
        throw_usage("--layers " + std::to_string(o.layers) + " is out of range: the checkpoint has " +
                    std::to_string(source_layers) + " layers");
    const std::uint32_t layers = o.layers ? o.layers : source_layers;
    const nlohmann::json config =
        layers < source_layers ? truncate_config(ck.config_json(), layers, ck.config_path()) : ck.config_json();

    const CodebookSource cb = o.draft ? load_codebook_source(o.codebook_path) : builtin_codebook_source();

    const ExpertGeometry geometry{layers, source_layers, static_cast<std::uint32_t>(mc.n_routed_experts),
                                  static_cast<std::uint64_t>(mc.hidden_size),
                                  static_cast<std::uint64_t>(mc.moe_intermediate_size)};
    std::optional<Imatrix> imatrix;
    ExpertImportance importance;
    if (!o.imatrix_path.empty() && o.draft) {
        progress.note("--imatrix is ignored for a draft container (its experts see the draft's inputs, which the "
                      "imatrix did not record)");
    } else if (!o.imatrix_path.empty()) {
        imatrix = read_imatrix(o.imatrix_path);
        importance = match_imatrix(*imatrix, geometry);
        if (!importance.unused.empty())
            progress.note("imatrix: " + std::to_string(importance.unused.size()) +
                          " tensors name no DeepSeek-V4 matrix and are not used (first: " +
                          importance.unused.front() + ")");
        if (!importance.skipped_layers.empty())
            progress.note("imatrix: tensors of layers " + layer_list(importance.skipped_layers) +
                          " are not used (--layers " + std::to_string(layers) + ")");
        if (!importance.missing_layers.empty())
            progress.note("imatrix: no data for " + std::to_string(importance.missing_layers.size()) + " of " +
                          std::to_string(layers) + " layers (first: layer " +
                          std::to_string(importance.missing_layers.front()) + "); they are quantised unweighted");
    }

    const QuantizePlan plan = plan_quantization(
        ck, {layers, source_layers, geometry.experts, geometry.hidden, geometry.intermediate, o.draft});

    // Optional sections of a main container, and the files they come from.
    std::vector<std::string> extra_sources;
    std::optional<std::string> tokenizer, chat;
    if (!o.draft) {
        const std::string tok = (fs::path(o.src_dir) / "tokenizer.json").string();
        const std::string tmpl = (fs::path(o.src_dir) / "chat_template.jinja").string();
        if (fs::exists(tok)) tokenizer = read_text(tok), extra_sources.push_back(tok);
        if (fs::exists(tmpl)) chat = read_text(tmpl), extra_sources.push_back(tmpl);
    }
    nlohmann::json sources = hash_sources(source_files(ck, extra_sources), pool, progress);
    nlohmann::json imatrix_source = nullptr;
    if (imatrix) imatrix_source = hash_sources({o.imatrix_path}, pool, null_progress()).at(0);

    nlohmann::json quantiser = {
        {"format", "TQ2875"},
        {"format_version", 1},
        {"codebook_id", cb.id},
        {"codebook", o.draft ? (cb.from_container ? "main container " : "codebook file ") +
                                   fs::path(o.codebook_path).filename().string()
                             : std::string("built-in")},
        {"rotation", rotation_name(o.matrix.rotation)},
        {"search_passes", o.matrix.encode.passes},
        {"imatrix", imatrix.has_value()},
        {"layers", layers},
        {"source_layers", source_layers},
    };
    nlohmann::json metadata = {
        {"config", config},
        {"quantiser", quantiser},
        {"provenance",
         {{"tool", o.tool}, {"created", o.created}, {"sources", sources}, {"imatrix", imatrix_source}}},
        {"role", o.draft ? "draft" : "main"},
        {"codebook_id", cb.id},
    };

    QuantizeReport report;
    report.codebook_id = cb.id;
    ContainerWriter writer(o.out_path);
    writer.set_metadata(std::move(metadata));
    if (!o.draft) writer.set_codebook(cb.bytes);
    if (tokenizer) writer.set_tokenizer_json(std::move(*tokenizer));
    if (chat) writer.set_chat_template(std::move(*chat));
    if (imatrix) {
        if (imatrix->legacy)
            progress.note("imatrix: a legacy .dat file has no per-expert counts; the container gets no expert profile");
        else if (importance.missing_layers.size() == layers)
            progress.note("imatrix: no routed-expert data for the kept layers; the container gets no expert profile");
        else
            writer.set_expert_profile(profile_from_imatrix(*imatrix, layers, nullptr).serialize());
    }

    ErrorSums total;
    std::vector<float> weights;
    std::vector<std::uint8_t> quantised;
    progress.begin(o.draft ? "quantising draft experts" : "quantising experts", plan.expert_weights, "weights");
    for (const PlanItem& item : plan.items) {
        if (!item.expert) {
            const TensorView& v = ck.tensor(item.name);
            writer.add_tensor(item.name, storage_type_of(v.dtype, item.name), v.shape, {v.data, v.nbytes});
            ++report.dense_tensors;
            report.dense_bytes += v.nbytes;
            continue;
        }
        writer.begin_expert(item.key);
        for (int which = 0; which < 3; ++which) {
            const std::string name = expert_matrix_name(item.key, which);
            const std::uint64_t rows = which == 1 ? geometry.hidden : geometry.intermediate;
            const std::uint64_t cols = which == 1 ? geometry.intermediate : geometry.hidden;
            weights.resize(rows * cols);
            ck.read_f32_into(name, {rows, cols}, weights.data());
            std::vector<float> imp;
            if (imatrix && !item.key.draft)
                imp = importance.importance(*imatrix, item.key.layer, item.key.expert, which, geometry);
            quantised.assign(matrix_bytes(rows, cols), 0);
            const bool rotated = with_context("tensor " + name, [&] {
                return quantize_matrix(weights, rows, cols, imp, o.matrix, cb.codebook, pool, quantised);
            });
            writer.begin_tensor(name, rotated ? StorageType::TQ2875R : StorageType::TQ2875, {rows, cols});
            writer.write(quantised);
            writer.end_tensor();
            const ErrorSums e = matrix_error(weights, rows, cols, quantised, rotated, cb.codebook, pool);
            total.error += e.error, total.reference += e.reference;
            const double nmse = e.reference > 0 ? e.error / e.reference : 0.0;
            if (nmse > report.worst_nmse || report.worst_matrix.empty()) report.worst_nmse = nmse, report.worst_matrix = name;
            report.rotated_matrices += rotated;
            ++report.matrices;
            report.expert_bytes += quantised.size();
            report.expert_weights += rows * cols;
            progress.advance(rows * cols);
        }
        writer.end_expert();
        ++report.experts;
    }
    progress.end();
    report.nmse = total.reference > 0 ? total.error / total.reference : 0.0;
    writer.finish();
    report.file_bytes = fs::file_size(o.out_path);
    return report;
}

}  // namespace aff::quant
