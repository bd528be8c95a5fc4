// Note "graceful-stop" (train/trainer.cpp): a stop the user asked for (SIGTERM before a spot instance is
// taken away, Ctrl-C) that ended a wait which would otherwise have lasted until a timeout, such as an
// elastic member's wait for a quorum that cannot form. Not an error: whoever catches it stops the run as
// asked, with a checkpoint where one can be written, and exits with 128 + the signal.
#pragma once

#include <stdexcept>
#include <string>

namespace loco {

class StopRequested : public std::runtime_error {
 public:
  StopRequested(int signal, const std::string& during) : std::runtime_error(during), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace loco
