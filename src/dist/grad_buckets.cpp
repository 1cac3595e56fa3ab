#include "dist/grad_buckets.h"

namespace stretch::dist {

std::vector<GradBucket> grad_buckets(const std::vector<int64_t>& numels, int64_t cap_bytes) {
  std::vector<GradBucket> out;
  GradBucket cur;
  for (size_t k = numels.size(); k-- > 0;) {
    cur.params.push_back(k);
    cur.offset.push_back(cur.numel);
    cur.numel += numels[k];
    if (cur.numel * static_cast<int64_t>(sizeof(float)) >= cap_bytes) {
      out.push_back(std::move(cur));
      cur = GradBucket{};
    }
  }
  if (!cur.params.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace stretch::dist
