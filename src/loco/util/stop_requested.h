// Note "graceful-stop" (train/trainer_stops.cpp): a stop the user asked for (SIGTERM before a spot instance is
// taken away, Ctrl-C) that ended a wait which would otherwise have lasted until a timeout, such as an
// elastic member's wait for a quorum that cannot form. Not an error: whoever catches it stops the run as
// asked, with a checkpoint where one can be written, and exits with 128 + the signal.
#pragma once

#include <stdexcept>
#include <string>

#include "loco/util/error.h"

namespace loco {

// A wait that ran out (note "gave-up-waiting"): an elastic member's quorum that did not form within comm.timeout_s,
// or a synchronisation that failed attempt after attempt for as long. An Error, which training meets as it meets a
// stop: the member checkpoints where it stands (its synchronisation still to do), then ends with this message and
// the checkpoint's name (before: the steps since the last checkpoint were lost, while a SIGTERM in the same wait
// kept them). Elsewhere it is reported like any Error.
class GaveUpWaiting : public Error {
 public:
  using Error::Error;
};

class StopRequested : public std::runtime_error {
 public:
  StopRequested(int signal, const std::string& during) : std::runtime_error(during), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace loco
