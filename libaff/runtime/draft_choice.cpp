// The --draft choice (draft_choice.hpp).
#include "libaff/runtime/draft_choice.hpp"

#include "libaff/core/atomic_file.hpp"
#include "libaff/core/error.hpp"
#include "libaff/model/draft_load.hpp"
#include "libaff/runtime/cpu_dspark_runner.hpp"
#include "libaff/runtime/cpu_sequence.hpp"
#include "libaff/runtime/draft_gate.hpp"
#include "libaff/runtime/dspark_drafter.hpp"
#include "libaff/runtime/gpu_dspark_runner.hpp"
#include "libaff/runtime/gpu_mtp_runner.hpp"
#include "libaff/runtime/mtp_drafter.hpp"

#include <cstdio>
#include <filesystem>

namespace aff {

DraftMode parse_draft_mode(std::string_view text) {
    if (text == "auto") return DraftMode::automatic;
    if (text == "mtp") return DraftMode::mtp;
    if (text == "dspark") return DraftMode::dspark;
    if (text == "off") return DraftMode::off;
    throw_usage("--draft: expected auto, mtp, dspark or off, got \"" + std::string(text) + "\"");
}

std::string draft_model_to_load(const DraftChoice& choice, const std::string& model_path) {
    if (choice.mode == DraftMode::off) return "";
    if (!choice.model_path.empty()) return choice.model_path;
    const std::string beside = default_draft_path(model_path);
    std::error_code ec;
    return !beside.empty() && std::filesystem::is_regular_file(beside, ec) ? beside : "";
}

void check_draft_tokens(std::size_t tokens) {
    if (tokens < 1 || tokens > max_draft_tokens)
        throw_usage("--draft-max: expected 1 to " + std::to_string(max_draft_tokens) + " draft tokens, got " +
                    std::to_string(tokens));
}

void check_draft_memory_flag(const DraftChoice& choice) {
    if (choice.memory.empty() || choice.memory == "off") return;
    if (choice.mode != DraftMode::automatic)
        throw_usage("--draft-memory keeps what --draft auto measured: it does nothing with --draft " +
                    std::string(choice.mode == DraftMode::mtp ? "mtp" : choice.mode == DraftMode::dspark ? "dspark" : "off"));
    check_output_path(choice.memory);
}

OpenedDrafter open_drafter(const DraftChoice& choice, const Model& model, Sequence& backend) {
    check_draft_tokens(choice.max_tokens);
    OpenedDrafter out;
    if (choice.mode == DraftMode::off) {
        out.description = "drafts off";
        return out;
    }
    const bool insist = choice.mode != DraftMode::automatic;
    // DSpark when asked, or for auto when the model has its stages: on the CPU trunk, or on a
    // GPU trunk on one GPU (its taps computed there, the stages on the device where they fit,
    // else on the CPU: gpu_dspark_runner.hpp; the line says which).
    auto* cpu = dynamic_cast<CpuSequence*>(&backend);
    if (choice.mode == DraftMode::dspark || (choice.mode == DraftMode::automatic && model.has_dspark())) {
        if (!model.has_dspark())
            throw_usage("--draft dspark: the model has no DSpark stages (give their draft container with --draft-model, "
                        "or put it beside the main one as <model>.dspark.aff)");
        std::unique_ptr<DsparkRunner> runner;
        std::string why;
        if (cpu) {
            runner = make_cpu_dspark_runner(model, *cpu);
        } else {
            runner = make_gpu_dspark_runner(model, backend, why);
        }
        if (runner) {
            const std::string where = cpu ? "" : ", " + runner->stages();
            auto dspark = std::make_unique<DsparkDrafter>(std::move(runner), choice.max_tokens);
            out.description = "drafts: dspark, up to " + std::to_string(dspark->max_tokens()) + " a step" + where;
            if (insist) {
                out.drafter = std::move(dspark);
            } else {
                out.drafter = std::make_unique<DraftGate>(std::move(dspark));
                out.description += ", while faster than without";
            }
            return out;
        }
        if (insist) throw_unsupported("--draft dspark: " + why);
        // auto: MTP, when the model has it, may still run here.
    }
    if (!model.has_mtp()) {
        if (insist)
            throw_usage("--draft mtp: the model has no MTP layer (transformers drops it from the checkpoints it saves; "
                        "aff-quantize --dspark puts it in a draft container: give it with --draft-model)");
        out.description = "drafts off (the model has no MTP layer)";
        return out;
    }
    std::unique_ptr<MtpDrafter> mtp;
    if (cpu) {
        mtp = std::make_unique<MtpDrafter>(model, *cpu, choice.max_tokens);
    } else {
        std::string why;
        std::unique_ptr<MtpRunner> runner = make_gpu_mtp_runner(backend, why);
        if (!runner) {
            if (insist) throw_unsupported("--draft mtp: " + why);
            out.description = "drafts off (" + why + ")";
            return out;
        }
        mtp = std::make_unique<MtpDrafter>(std::move(runner), choice.max_tokens);
    }
    out.description = "drafts: mtp, up to " + std::to_string(choice.max_tokens) + " a step";
    if (insist) {
        out.drafter = std::move(mtp);
    } else {
        out.drafter = std::make_unique<DraftGate>(std::move(mtp));
        out.description += ", while faster than without";
    }
    return out;
}

double mean_accepted(const GenerateStats& stats) {
    return stats.verify_calls ? double(stats.accepted_tokens) / double(stats.verify_calls) : 0.0;
}

std::string acceptance_summary(const GenerateStats& stats) {
    if (stats.verify_calls == 0) return "drafts: no verify calls";
    char head[160];
    const double mean = mean_accepted(stats);
    std::snprintf(head, sizeof head, "drafts: %zu verify calls, %.2f of %zu accepted on average (%.2f tokens a verify call); acceptance by position",
                  stats.verify_calls, mean, stats.drafted_at.size(), mean + 1.0);
    std::string out = head;
    for (std::size_t i = 0; i < stats.drafted_at.size(); ++i) {
        char v[16];
        std::snprintf(v, sizeof v, " %.2f", stats.drafted_at[i] ? double(stats.accepted_at[i]) / double(stats.drafted_at[i]) : 0.0);
        out += v;
    }
    return out;
}

}  // namespace aff
