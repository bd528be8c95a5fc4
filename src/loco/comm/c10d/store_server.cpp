#include "loco/comm/c10d/store_server.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "loco/comm/c10d/c10d_errors.h"
#include "loco/comm/c10d/store_front.h"
#include "loco/comm/comm_error.h"

namespace loco::comm {

struct StoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::unique_ptr<StoreFront> front;  // what clients connect to (store_front.h)
};

StoreServer::StoreServer(int port) : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions options;
  options.port = 0;  // a free port; clients come through the front on `port`
  options.isServer = true;
  options.waitWorkers = false;  // members come and go; nobody is waited for
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("cannot start the run's store: {}", first_line(e)));
  }
  impl_->front = std::make_unique<StoreFront>(port, impl_->store->getPort());
}

StoreServer::~StoreServer() = default;

int StoreServer::port() const { return impl_->front->port(); }

}  // namespace loco::comm
