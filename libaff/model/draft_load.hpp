// Loading a main .aff container together with its draft container (formats/container.md §5.1:
// aff-quantize --dspark writes a model's mtp.* stages, MTP or DSpark, as a container of their
// own, quantised against the main container's codebook and carrying only its id). The pair
// loads as one Model: the trunk from the main container, the mtp.* tensors and draft experts
// from the draft, every TQ2875 matrix of both decoded with the main container's codebook. A
// draft whose codebook or config is not the main container's is refused with one line naming
// the draft file, before any weight is read.
#pragma once

#include "libaff/core/thread_pool.hpp"
#include "libaff/model/forward.hpp"

#include <memory>
#include <string>

namespace aff {

// Where a model's draft container lies by default: "<stem>.dspark.aff" beside a main container
// "<stem>.aff" (any other file name: the name with ".dspark.aff" appended); "" for a checkpoint
// directory, whose mtp.* tensors are its own.
std::string default_draft_path(const std::string& model_path);

// Model::load(model_path) when draft_path is empty; else the main container model_path with the
// draft container draft_path. Throws usage when model_path is no container, and format (naming
// draft_path) for a file that is no draft container, a codebook id or a config that differs
// from the main container's.
std::unique_ptr<Model> load_model_with_draft(const std::string& model_path, const std::string& draft_path,
                                             ThreadPool& pool, ForwardOptions options = {});

}  // namespace aff
