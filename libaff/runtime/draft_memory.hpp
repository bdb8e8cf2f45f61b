// What --draft auto learned, kept between processes (formats/draft-memory.md). DraftGate
// measures on the generation itself whether drafting pays, which costs a short generation
// where it does not a probe of drafts (issue 18: 20 % of 48 tokens on the 4-layer DSpark
// container). The answer depends only on the model, its drafts and the backend they run on,
// so aff-run keeps the gate's rates in a small file keyed by those and the next run on the
// same three starts from them (DraftGate::recall). The file is a cache: a missing one is no
// memory, and one that cannot be read or is not ours is ignored with a warning, never an error;
// it is written whole or not at all (AtomicFile).
#pragma once

#include "libaff/runtime/draft_choice.hpp"
#include "libaff/runtime/draft_gate.hpp"
#include "libaff/runtime/sequence.hpp"

#include <cstddef>

#include <optional>
#include <string>
#include <string_view>

namespace aff {

// Where the memory of `key` lives: `setting` is --draft-memory's value ("" the default,
// "off", or a file). The default is draft-gate-<16 hex digits of XXH3-64(key)>.json in
// $AFF_CACHE_DIR, else $XDG_CACHE_HOME/aff, else $HOME/.cache/aff; "" (no memory) when
// `setting` is "off" or none of those is set.
std::string draft_memory_path(const std::string& setting, const std::string& key);

// The key: what the rates depend on. Files are named by path, size and modification time
// (a rewritten container is another model); the backend and drafter by the lines the tools
// print for them (device, placement, threads; drafter and draft length).
std::string draft_memory_key(const std::string& model_path, const std::string& draft_path, const std::string& backend,
                             const std::string& drafter);

struct DraftMemoryRead {
    std::optional<GateMemory> memory;  // none: no file, or `warning` says why it was ignored
    std::string warning;               // "" or one line naming the file and what is wrong
};
DraftMemoryRead read_draft_memory(const std::string& path, const std::string& key);
// The same for a file's bytes (`path` only names it in the warning): never throws, whatever
// the bytes (tests/fuzz/draft_memory_fuzz.cpp).
DraftMemoryRead parse_draft_memory(std::string_view text, const std::string& key, const std::string& path);

// Writes the memory of `key` to `path` (its folder made when missing); returns "" or a
// warning line naming the file and why it could not be written.
std::string write_draft_memory(const std::string& path, const std::string& key, const GateMemory& memory);

// Where a generation's drafter keeps its memory, as aff-run and aff-serve both find it (so
// they share one): the key from the model file, the draft container draft_model_to_load
// picks, the backend's line with the thread count and the drafter's line; the path from
// --draft-memory. Empty (no file looked at) unless the drafter is a DraftGate (--draft auto)
// and the memory is not off.
struct DraftMemorySite {
    std::string path, key;
};
DraftMemorySite draft_memory_site(const DraftChoice& choice, const std::string& model_path, const Sequence& backend,
                                  std::size_t threads, const OpenedDrafter& drafter);

// The tools' two steps, for a drafter that is a DraftGate (--draft auto; any other: nothing
// happens). Before the first generation: read and recall; the lines to print (a warning, or
// what the gate starts from). After a generation: write what it measured; nothing to write
// (none: no gate, no path, or it measured neither way), "" written, or a warning.
struct DraftMemoryNotes {
    std::string warning;  // the file was ignored
    std::string recalled; // "drafts: from FILE: ..." when the gate took it
};
DraftMemoryNotes recall_draft_memory(Drafter* drafter, const std::string& path, const std::string& key);
std::optional<std::string> keep_draft_memory(const Drafter* drafter, const std::string& path, const std::string& key);

}  // namespace aff
