// WeightSource's non-virtual convenience: a whole tensor as float32.
#include "runtime/weights/weight_source.h"

namespace tpserve {

std::vector<float> WeightSource::read_all_f32(const std::string& name) const {
  const TensorMeta m = meta(name);
  std::vector<Range> ranges;
  ranges.reserve(m.shape.size());
  for (int64_t d : m.shape) ranges.push_back(Range{0, d});
  std::vector<float> out(static_cast<size_t>(m.numel()));
  read(name, ranges, DType::kF32, out.data());
  return out;
}

}  // namespace tpserve
