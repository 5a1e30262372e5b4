// The rendezvous store (torch.distributed's TCPStore): rank 0 serves a small
// key-value store on MASTER_PORT, every rank (rank 0 too) connects to
// MASTER_ADDR:MASTER_PORT. Processes started by any launcher find each other
// through it and exchange what a group needs (NCCL's unique id, the
// cross-rank checks; the 'tcp' backend's data). docs/design/distributed.md.
//
// Every wait has the store's deadline; a rank that disconnects without
// close() (its process died) breaks the store, and every waiting or later
// request raises at once instead of waiting for the timeout.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pyflame::distributed::detail {

class StoreServer;

class TcpStore {
 public:
  // is_server: listen on `port` first (rank 0). Connecting retries until
  // timeout_s. rank >= 0 registers this client's rank (for the error a
  // dead rank gives the others); fn names the caller in errors.
  TcpStore(const std::string& host, int port, bool is_server, double timeout_s, int rank,
           const char* fn);
  ~TcpStore();  // close()
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::string& value, const char* fn);
  // Waits until the key exists.
  std::string get(const std::string& key, const char* fn);
  // Waits until the key exists, returns and deletes it (a mailbox).
  std::string take(const std::string& key, const char* fn);
  // Adds to an integer key (0 when absent); returns the new value.
  int64_t add(const std::string& key, int64_t delta, const char* fn);
  bool check(const std::string& key, const char* fn);
  bool remove(const std::string& key, const char* fn);
  // Each of `world` callers of the same key passes its part; every caller
  // gets all parts in rank order. The server forgets the key afterwards.
  std::vector<std::string> gather(const std::string& key, int rank, int world, const std::string& part,
                                  const char* fn);
  // Says goodbye (a clean leave, not a death) and closes; the server (rank
  // 0) waits a moment for the other ranks to leave before it stops.
  void close();

  const std::string& address() const { return address_; }
  double timeout() const { return timeout_; }

 private:
  std::string request(uint8_t cmd, const std::string& key, const std::string& value, const char* fn);
  void connect_with_retry(const std::string& host, int port, const char* fn);

  std::string address_;  // "host:port", for errors
  double timeout_;
  int fd_ = -1;
  bool broken_ = false;  // a timed-out reply may still arrive: the stream is out of step
  std::mutex mu_;         // one request at a time
  std::unique_ptr<StoreServer> server_;
};

}  // namespace pyflame::distributed::detail
