// A set of parameters that one outer step updates together, seen as one flat vector: all of the
// model for DiLoCo and NoLoCo, a few transformer blocks for a Streaming DiLoCo fragment
// (docs/algorithm-reference.md §4 point 1). The pieces are 1-D views into the flat parameter buffers (note
// "flat-parameters"); neighbouring slices of one buffer are merged, so a fragment is a handful of
// copies, not one per parameter tensor.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "loco/train/flat_parameters.h"

namespace loco {

class ParameterFragment {
 public:
  explicit ParameterFragment(std::string name) : name_(std::move(name)) {}

  // Appends a 1-D view into a flat parameter buffer: the values of one parameter of shape `shape`.
  void add(const torch::Tensor& slice, std::vector<std::int64_t> shape);

  const std::string& name() const { return name_; }
  std::int64_t numel() const { return numel_; }
  // The shapes of the parameters it holds, in the order of its values (SparseLoCo tiles each one).
  const std::vector<std::vector<std::int64_t>>& shapes() const { return shapes_; }
  // The parameters, copied into one new host (CPU) tensor.
  torch::Tensor read() const;
  // Overwrites the parameters with `values` (numel() elements, any device).
  void write(const torch::Tensor& values);

 private:
  std::string name_;
  std::vector<torch::Tensor> slices_;
  std::vector<std::vector<std::int64_t>> shapes_;
  std::int64_t numel_ = 0;
};

// Runs `fn` with the fragment's parameters set to `values`, then puts the previous ones back (to
// evaluate the global parameters of a replica that trains its own).
void with_values(ParameterFragment& fragment, const torch::Tensor& values, const std::function<void()>& fn);
// The same for several fragments at once (`values[p]` for fragment p).
void with_values(std::vector<ParameterFragment>& fragments, const std::vector<torch::Tensor>& values,
                 const std::function<void()>& fn);

// One fragment with every parameter.
ParameterFragment whole_model(const FlatParameters& parameters);

// Streaming DiLoCo's fragments (docs/algorithm-reference.md §4): block l goes to fragment l mod P ("strided") or
// to fragment floor(l·P/L) ("sequential"). The embeddings join block 0's fragment and the final
// norm and output layer the last block's, unless `embeddings_own_fragment`, which adds them as
// fragment P.
std::vector<ParameterFragment> block_fragments(const FlatParameters& parameters, std::int64_t num_layers,
                                               std::int64_t fragments, bool strided, bool embeddings_own_fragment);

}  // namespace loco
