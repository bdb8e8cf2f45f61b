// quantize_checkpoint: plans the run (quantize_plan.hpp), checks the imatrix against
// the checkpoint (expert_importance.hpp), then streams the container: dense tensors copied
// from the memory-mapped checkpoint, each routed expert dequantised, quantised and written
// as one extent. With the searches on a GPU the work is a pipeline: while the GPU searches
// matrix i, the threads finish matrix i-1 (scales, bit packing, its error) and dequantise
// and prepare matrix i+1; the sources are hashed and the container written on threads of
// their own meanwhile. Every byte of the file is still decided in plan order, and
// quantize_matrix's bytes do not depend on the thread count, so neither does the file.
#include "libaff/quant/quantize_model.hpp"

#include "libaff/checkpoint/checkpoint.hpp"
#include "libaff/container/writer.hpp"
#include "libaff/core/error.hpp"
#include "libaff/core/mapped_file.hpp"
#include "libaff/checkpoint/config.hpp"
#include "libaff/quant/codebook_source.hpp"
#include "libaff/quant/config_truncate.hpp"
#include "libaff/quant/expert_importance.hpp"
#include "libaff/quant/expert_profile.hpp"
#include "libaff/quant/imatrix.hpp"
#include "libaff/quant/quantize_plan.hpp"
#include "libaff/quant/source_digests.hpp"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

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
    return {};
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

// Runs jobs in order on a thread of its own (the container's writes), so the threads that
// quantise never wait for the disk. At most `max_queued` jobs wait (each may hold a
// matrix's bytes); the first error is rethrown by the next push() or by drain().
class JobThread {
public:
    explicit JobThread(std::size_t max_queued) : max_(max_queued), thread_([this] { loop(); }) {}
    ~JobThread() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
            jobs_.clear();  // not drained: an error is on its way out, the file will not be kept
        }
        changed_.notify_all();
        thread_.join();
    }
    JobThread(const JobThread&) = delete;
    JobThread& operator=(const JobThread&) = delete;

    void push(std::function<void()> job) {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return error_ || jobs_.size() < max_; });
        if (error_) std::rethrow_exception(error_);
        jobs_.push_back(std::move(job));
        changed_.notify_all();
    }
    // Waits until every job has run.
    void drain() {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return error_ || (jobs_.empty() && !busy_); });
        if (error_) std::rethrow_exception(error_);
    }

private:
    void loop() {
        std::unique_lock lock(mutex_);
        for (;;) {
            changed_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
            if (stop_) return;
            std::function<void()> job = std::move(jobs_.front());
            jobs_.pop_front();
            busy_ = true;
            lock.unlock();
            std::exception_ptr error;
            try {
                job();
            } catch (...) {
                error = std::current_exception();
            }
            lock.lock();
            busy_ = false;
            if (error && !error_) error_ = error, jobs_.clear();
            changed_.notify_all();
        }
    }

    const std::size_t max_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::function<void()>> jobs_;
    std::exception_ptr error_;
    bool busy_ = false, stop_ = false;
    std::thread thread_;  // last: starts once the rest exists
};

// The plan as the writer sees it: a dense tensor, the start or end of an expert's extent,
// or one of its three matrices.
struct Step {
    enum Kind { dense, begin_expert, matrix, end_expert } kind;
    const PlanItem* item;
    int which = 0;  // matrix: 0 w1, 1 w2, 2 w3
};

std::vector<Step> plan_steps(const QuantizePlan& plan) {
    std::vector<Step> steps;
    for (const PlanItem& item : plan.items) {
        if (!item.expert) {
            steps.push_back({Step::dense, &item});
            continue;
        }
        steps.push_back({Step::begin_expert, &item});
        for (int which = 0; which < 3; ++which) steps.push_back({Step::matrix, &item, which});
        steps.push_back({Step::end_expert, &item});
    }
    return steps;
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

    // A checkpoint aff-run would refuse must not become a container aff-verify passes.
    if (o.check_complete) o.check_complete(ck, config);

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
    // Hashed while the experts are quantised: the digests go into the metadata, which the
    // writer puts in the file only at the end. Two threads: the pool has the cores.
    std::vector<std::string> hashed = source_files(ck, extra_sources);
    if (imatrix) hashed.push_back(o.imatrix_path);
    BackgroundHashes hashes(hashed, 2);

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
    QuantizeReport report;
    report.codebook_id = cb.id;
    ContainerWriter writer(o.out_path);
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

    MatrixError total;
    JobThread write(8);
    const std::vector<Step> steps = plan_steps(plan);
    std::size_t written = 0;  // steps before this one are queued for the writer
    // Queues the dense tensors and extent boundaries before step `until`.
    auto write_until = [&](std::size_t until) {
        for (; written < until; ++written) {
            const Step& st = steps[written];
            if (st.kind == Step::dense) {
                const TensorView& v = ck.tensor(st.item->name);
                const StorageType type = storage_type_of(v.dtype, st.item->name);
                write.push([&writer, &v, type, name = st.item->name] { writer.add_tensor(name, type, v.shape, {v.data, v.nbytes}); });
                ++report.dense_tensors;
                report.dense_bytes += v.nbytes;
            } else if (st.kind == Step::begin_expert) {
                write.push([&writer, key = st.item->key] { writer.begin_expert(key); });
            } else if (st.kind == Step::end_expert) {
                write.push([&writer] { writer.end_expert(); });
                ++report.experts;
            }
        }
    };
    std::vector<std::size_t> matrices;  // the matrix steps, in order
    for (std::size_t i = 0; i < steps.size(); ++i)
        if (steps[i].kind == Step::matrix) matrices.push_back(i);
    struct Shape {
        std::string name;
        std::uint64_t rows, cols;
    };
    auto shape_of = [&](std::size_t m) {
        const Step& st = steps[matrices[m]];
        return Shape{expert_matrix_name(st.item->key, st.which), st.which == 1 ? geometry.hidden : geometry.intermediate,
                     st.which == 1 ? geometry.intermediate : geometry.hidden};
    };
    // Matrix m's weights (dequantised on the pool) and importance.
    std::vector<float> weights, imp;
    auto load = [&](std::size_t m) {
        const Step& st = steps[matrices[m]];
        const Shape sh = shape_of(m);
        weights.resize(sh.rows * sh.cols);
        ck.read_f32_into(sh.name, {sh.rows, sh.cols}, weights.data(), pool);
        imp.clear();
        if (imatrix && !st.item->key.draft)
            imp = importance.importance(*imatrix, st.item->key.layer, st.item->key.expert, st.which, geometry);
    };
    // Matrix m is quantised: account for it and queue its bytes after what precedes it.
    auto done = [&](std::size_t m, bool rotated, const MatrixError& e, std::vector<std::uint8_t> bytes) {
        const Shape sh = shape_of(m);
        write_until(matrices[m]);
        total.error += e.error, total.reference += e.reference;
        const double nmse = e.reference > 0 ? e.error / e.reference : 0.0;
        if (nmse > report.worst_nmse || report.worst_matrix.empty()) report.worst_nmse = nmse, report.worst_matrix = sh.name;
        report.rotated_matrices += rotated;
        ++report.matrices;
        report.expert_bytes += bytes.size();
        report.expert_weights += sh.rows * sh.cols;
        write.push([&writer, rotated, sh, bytes = std::move(bytes)] {
            writer.begin_tensor(sh.name, rotated ? StorageType::TQ2875R : StorageType::TQ2875, {sh.rows, sh.cols});
            writer.write(bytes);
            writer.end_tensor();
        });
        written = matrices[m] + 1;
        progress.advance(sh.rows * sh.cols);
    };

    progress.begin(o.draft ? "quantising draft experts" : "quantising experts", plan.expert_weights, "weights");
    const std::size_t count = matrices.size();
    if (!o.matrix.search) {  // the searches on the pool: nothing to overlap them with
        for (std::size_t m = 0; m < count; ++m) {
            const Shape sh = shape_of(m);
            load(m);
            std::vector<std::uint8_t> bytes(matrix_bytes(sh.rows, sh.cols));
            MatrixError e;
            const bool rotated = with_context("tensor " + sh.name + " of " + ck.file_of(sh.name), [&] {
                return quantize_matrix(weights, sh.rows, sh.cols, imp, o.matrix, cb.codebook, pool, bytes, &e);
            });
            done(m, rotated, e, std::move(bytes));
        }
    } else {  // the GPU searches m while the pool finishes m - 1 and prepares m + 1
        MatrixEncoder encoders[3];
        auto prepare = [&](std::size_t m) {
            load(m);
            const Shape sh = shape_of(m);
            with_context("tensor " + sh.name + " of " + ck.file_of(sh.name), [&] {
                encoders[m % 3].prepare(weights, sh.rows, sh.cols, imp, o.matrix, cb.codebook, pool);
            });
        };
        auto finish = [&](std::size_t m) {
            const Shape sh = shape_of(m);
            std::vector<std::uint8_t> bytes(matrix_bytes(sh.rows, sh.cols));
            MatrixError e;
            const bool rotated =
                with_context("tensor " + sh.name, [&] { return encoders[m % 3].finish(pool, bytes, &e); });
            done(m, rotated, e, std::move(bytes));
        };
        if (count) prepare(0);
        for (std::size_t m = 0; m < count; ++m) {
            if (m) with_context("tensor " + shape_of(m - 1).name, [&] { encoders[(m - 1) % 3].wait(); });
            encoders[m % 3].start();
            if (m) finish(m - 1);
            if (m + 1 < count) prepare(m + 1);
        }
        if (count) finish(count - 1);
    }
    write_until(steps.size());
    write.drain();
    progress.end();
    report.nmse = total.reference > 0 ? total.error / total.reference : 0.0;

    nlohmann::json sources = hashes.get();
    nlohmann::json imatrix_source = nullptr;
    if (imatrix) imatrix_source = sources.back(), sources.erase(sources.size() - 1);
    nlohmann::json metadata = {
        {"config", config},
        {"quantiser", quantiser},
        {"provenance",
         {{"tool", o.tool}, {"created", o.created}, {"sources", sources}, {"imatrix", imatrix_source}}},
        {"role", o.draft ? "draft" : "main"},
        {"codebook_id", cb.id},
    };

    writer.set_metadata(std::move(metadata));
    writer.finish();
    report.file_bytes = fs::file_size(o.out_path);
    return report;
}

}  // namespace aff::quant
