// The membership of a static run (note "membership", train/membership.h): every replica of the run takes
// part in every synchronisation, as one attempt with the whole group that always commits. Nobody heals
// and nothing is retried: a collective that fails ends the run. Replica r of M reads every M-th window of
// the data order from window r and writes OUT_DIR/replica_r (note "replica-directories").
#pragma once

#include "loco/train/membership.h"

namespace loco {

class FixedMembership final : public Membership {
 public:
  // `group`: every replica of the run (nullptr: a single replica); `replicas`: dist.replicas, which the
  // group must hold (InternalError otherwise); `shared_data`: the replicas are threads of one process and
  // read one data directory, so their tokenizers need no comparing.
  FixedMembership(comm::Group* group, std::int64_t replicas, bool shared_data);

  std::filesystem::path directory(const std::filesystem::path& out_dir) const override;
  DataSlice data_slice() const override;
  void check_same_data(const std::filesystem::path& data_dir) override;

  std::string describe() const override;
  int replica() const override { return rank_; }
  bool may_abort() const override { return false; }
  void synchronise(std::int64_t step, const Synchronisation& sync) override;
  bool commit(const Participants& who, const std::function<NamedTensors()>& candidate, const std::vector<int>& rejected,
              const std::function<void(comm::Group&, int root)>& share) override {
    return true;
  }
  void failed(const Participants& who, const std::exception_ptr& error) override { std::rethrow_exception(error); }
  void skipped(const Participants& who, const std::vector<int>& with, const std::exception_ptr& error) override {
    std::rethrow_exception(error);
  }
  void round_begins(const Participants& who, std::int64_t point, std::int64_t steps, RoundStart start) override {
    last_point_ = point;
  }
  std::int64_t last_point() const override { return last_point_; }

 private:
  comm::Group* group_;
  int rank_ = 0;
  int size_ = 1;
  bool shared_data_;
  std::int64_t last_point_ = 0;
};

}  // namespace loco
