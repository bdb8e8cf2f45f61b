// Which drafter a generation uses (aff-run's and aff-serve's --draft, --draft-max), in one
// place so both tools parse, refuse and describe it alike: "auto" drafts with the DSpark
// stages when the model has them (a DSpark checkpoint, or a draft container loaded beside the
// main one: libaff/model/draft_load.hpp) on the CPU reference, else with the MTP layer when
// it has one and runs on a backend that can draft with it (the CPU reference, or the GPU when
// the MTP layer is on it: GpuModel::has_mtp), and then only while drafting is measured faster
// than decoding without (draft_gate.hpp); "mtp" and "dspark" insist on that drafter; "off"
// never drafts.
#pragma once

#include "libaff/model/forward.hpp"
#include "libaff/runtime/drafter.hpp"
#include "libaff/runtime/generate.hpp"
#include "libaff/runtime/sequence.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace aff {

enum class DraftMode { automatic, mtp, dspark, off };

struct DraftChoice {
    DraftMode mode = DraftMode::automatic;
    std::size_t max_tokens = 3;  // draft tokens a verify call checks at most
    std::string model_path;      // --draft-model: the draft container; empty: <model>.dspark.aff when there
    std::string memory;          // --draft-memory: auto's memory file, "off", or "" for the default (draft_memory.hpp)
};

// The draft container to load beside `model_path` (load_model_with_draft): none with drafts
// off; the --draft-model file when given; else the default one (default_draft_path) when it
// exists; else none.
std::string draft_model_to_load(const DraftChoice& choice, const std::string& model_path);

// The largest --draft-max: a verify call of more tokens than this is never worth it.
constexpr std::size_t max_draft_tokens = 16;

// "auto", "mtp", "dspark" or "off"; throws usage naming the value otherwise.
DraftMode parse_draft_mode(std::string_view text);

// Throws usage for a draft length outside 1 .. max_draft_tokens.
void check_draft_tokens(std::size_t tokens);

// Throws usage for --draft-memory FILE with a --draft other than auto (only auto's gate
// learns anything to keep), and for a FILE that cannot stand as a regular file.
void check_draft_memory_flag(const DraftChoice& choice);

struct OpenedDrafter {
    std::unique_ptr<Drafter> drafter;  // null: no drafting
    std::string description;           // "mtp, up to 3 draft tokens" or why there is none
};

// The drafter for generations on `backend` (the sequence open_sequence built, before any
// wrapper). Throws usage for "mtp" ("dspark") on a model without an MTP layer (DSpark
// stages) and unsupported for "mtp" on a backend that cannot draft with it (a GPU model whose
// MTP layer is not on the GPU: split across GPUs, attention on the CPU, or its experts stored
// unlike the trunk's) and for "dspark" off the CPU reference (DSpark drafts run there only so
// far). `model` and `backend` must outlive it.
OpenedDrafter open_drafter(const DraftChoice& choice, const Model& model, Sequence& backend);

// One line of what the drafts did in a generation: "drafts: 12 verify calls, 1.83 of 3
// accepted on average (2.83 tokens a verify call); acceptance by position 0.92 0.75 0.58"
// (position i: the share of verify calls that drafted it whose first i+1 guesses all held).
std::string acceptance_summary(const GenerateStats& stats);

// Mean draft tokens accepted per verify call (0 without one).
double mean_accepted(const GenerateStats& stats);

}  // namespace aff
