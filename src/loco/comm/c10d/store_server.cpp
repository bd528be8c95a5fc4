#include "loco/comm/c10d/store_server.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "loco/comm/c10d/c10d_errors.h"
#include "loco/comm/comm_error.h"

namespace loco::comm {

struct StoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

StoreServer::StoreServer(int port) : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;  // members come and go; nobody is waited for
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("cannot serve the run's store on port {}: {}. Choose another --store-port (0 picks "
                                "a free one)",
                                port, first_line(e)));
  }
}

StoreServer::~StoreServer() = default;

int StoreServer::port() const { return impl_->store->getPort(); }

}  // namespace loco::comm
