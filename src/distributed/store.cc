// The rendezvous store: a key-value server on one thread of rank 0 and a
// blocking client in every rank, over TCP (store.h). Messages:
//   request: u8 cmd | u32 key length | u64 value length | key | value
//   reply:   u8 status (0 ok, 1 error) | u64 length | payload
// A GET/TAKE of an absent key, and a GATHER short of its world, park on the
// server until the key or the last part arrives; the client waits for the
// reply with its deadline.
#include "distributed/store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "pyflame/errors.h"

namespace pyflame::distributed::detail {

namespace {

using Clock = std::chrono::steady_clock;

enum Cmd : uint8_t { Set = 1, Get, Take, Add, Check, Delete, Gather, Hello, Bye };

#pragma pack(push, 1)
struct RequestHeader {
  uint8_t cmd;
  uint32_t key_len;
  uint64_t value_len;
};
struct ReplyHeader {
  uint8_t status;
  uint64_t len;
};
#pragma pack(pop)

std::string os_error(int err) { return std::strerror(err); }

// Milliseconds left until the deadline, for poll().
int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1000));
}

enum class Io { Ok, Closed, Late, Failed };

// Waits for the socket until the deadline (poll in slices, EINTR-safe).
Io wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return Io::Ok;
    if (n < 0 && errno != EINTR) return Io::Failed;
    if (Clock::now() >= deadline) return Io::Late;
  }
}

Io write_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Io w = wait_for(fd, POLLOUT, deadline);
      if (w != Io::Ok) return w;
      continue;
    }
    return errno == EPIPE || errno == ECONNRESET ? Io::Closed : Io::Failed;
  }
  return Io::Ok;
}

Io read_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return Io::Closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      Io w = wait_for(fd, POLLIN, deadline);
      if (w != Io::Ok) return w;
      continue;
    }
    return errno == ECONNRESET ? Io::Closed : Io::Failed;
  }
  return Io::Ok;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string pack_gather(int rank, int world, const std::string& part) {
  std::string v(8, '\0');
  uint32_t r = static_cast<uint32_t>(rank), w = static_cast<uint32_t>(world);
  std::memcpy(v.data(), &r, 4);
  std::memcpy(v.data() + 4, &w, 4);
  return v + part;
}

}  // namespace

// ---------------------------------------------------------------- server

class StoreServer {
 public:
  StoreServer(int port, double timeout_s, const char* fn) : timeout_(timeout_s) {
    listen_on(port, fn);
    if (::pipe(wake_) != 0) {
      ::close(listen_fd_);
      throw RuntimeError(errmsg(fn, "pipe() failed: " + os_error(errno)));
    }
    thread_ = std::thread([this] { loop(); });
  }

  // Waits (a bounded moment) for the other ranks to leave, so that replies
  // already due reach them, then stops.
  ~StoreServer() {
    stopping_ = true;
    char b = 1;
    (void)!::write(wake_[1], &b, 1);
    thread_.join();
    for (auto& [id, c] : clients_) ::close(c.fd);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

 private:
  struct Client {
    int fd;
    int rank = -1;
    bool bye = false;
    bool dead = false;
  };
  struct Waiter {
    uint64_t client;
    bool take;
  };
  struct GatherState {
    int world = 0, count = 0;
    std::vector<std::string> parts;
    std::vector<uint64_t> clients;  // by rank; 0 = not arrived
  };

  void listen_on(int port, const char* fn) {
    // Dual-stack where IPv6 exists, so "localhost" reaches it either way.
    int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
    bool v6 = fd >= 0;
    if (!v6) fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw RuntimeError(errmsg(fn, "socket() failed: " + os_error(errno)));
    int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (v6) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    if (rc != 0 || ::listen(fd, 128) != 0) {
      int err = errno;
      ::close(fd);
      throw RuntimeError(errmsg(fn, "rank 0 cannot listen on port " + std::to_string(port) + ": " +
                                        os_error(err) + " (another job on this port? set MASTER_PORT)"));
    }
    listen_fd_ = fd;
  }

  void loop() {
    Clock::time_point grace{};
    for (;;) {
      if (stopping_) {
        if (grace == Clock::time_point{})
          grace = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(std::min(timeout_, 10.0)));
        if (clients_.empty() || Clock::now() >= grace) return;
      }
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      std::vector<uint64_t> ids;
      for (auto& [id, c] : clients_) {
        fds.push_back({c.fd, POLLIN, 0});
        ids.push_back(id);
      }
      int n = ::poll(fds.data(), fds.size(), stopping_ ? 50 : -1);
      if (n < 0) continue;  // EINTR
      if (fds[0].revents) {
        char buf[16];
        (void)!::read(wake_[0], buf, sizeof(buf));
      }
      if (fds[1].revents & POLLIN) accept_one();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto it = clients_.find(ids[i - 2]);
        if (it != clients_.end() && !it->second.dead && !serve(ids[i - 2])) it->second.dead = true;
      }
      for (auto it = clients_.begin(); it != clients_.end();) {
        if (it->second.dead) {
          drop(it->second);
          it = clients_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  void accept_one() {
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    no_delay(fd);
    clients_.emplace(next_id_++, Client{fd});
  }

  Clock::time_point deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  }

  // A client gone without BYE while registered as a rank: its process died.
  // Every waiter, and every later request, gets the reason.
  void drop(const Client& c) {
    ::close(c.fd);
    if (c.rank < 0 || c.bye || !broken_.empty()) return;
    broken_ = "rank " + std::to_string(c.rank) +
              " left the process group without closing it (its process exited or was killed)";
    for (auto& [key, ws] : waiters_)
      for (const Waiter& w : ws) reply(w.client, 1, broken_);
    waiters_.clear();
    for (auto& [key, g] : gathers_)
      for (uint64_t id : g.clients)
        if (id) reply(id, 1, broken_);
    gathers_.clear();
  }

  void reply(uint64_t id, uint8_t status, const std::string& payload) {
    auto it = clients_.find(id);
    if (it == clients_.end() || it->second.dead) return;
    ReplyHeader h{status, payload.size()};
    auto d = deadline();
    if (write_all(it->second.fd, &h, sizeof(h), d) != Io::Ok ||
        write_all(it->second.fd, payload.data(), payload.size(), d) != Io::Ok)
      it->second.dead = true;
  }

  // Reads and answers one request; false when the connection ended.
  bool serve(uint64_t id) {
    Client& c = clients_.at(id);
    RequestHeader h;
    auto d = deadline();
    if (read_all(c.fd, &h, sizeof(h), d) != Io::Ok) return false;
    std::string key(h.key_len, '\0'), value(h.value_len, '\0');
    if (read_all(c.fd, key.data(), key.size(), d) != Io::Ok) return false;
    if (read_all(c.fd, value.data(), value.size(), d) != Io::Ok) return false;
    if (h.cmd == Bye) {
      c.bye = true;
      reply(id, 0, "");
      return true;
    }
    if (!broken_.empty()) {
      reply(id, 1, broken_);
      return true;
    }
    switch (h.cmd) {
      case Hello: {
        int32_t rank = -1;
        if (value.size() == 4) std::memcpy(&rank, value.data(), 4);
        c.rank = rank;
        reply(id, 0, "");
        break;
      }
      case Set:
        kv_[key] = std::move(value);
        reply(id, 0, "");
        wake(key);
        break;
      case Get:
      case Take: {
        auto it = kv_.find(key);
        if (it == kv_.end()) {
          waiters_[key].push_back({id, h.cmd == Take});
        } else {
          reply(id, 0, it->second);
          if (h.cmd == Take) kv_.erase(it);
        }
        break;
      }
      case Add: {
        int64_t delta = 0;
        if (value.size() == 8) std::memcpy(&delta, value.data(), 8);
        auto it = kv_.find(key);
        int64_t now = (it == kv_.end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 10)) + delta;
        kv_[key] = std::to_string(now);
        reply(id, 0, kv_[key]);
        wake(key);
        break;
      }
      case Check:
        reply(id, 0, kv_.count(key) ? "1" : "0");
        break;
      case Delete:
        reply(id, 0, kv_.erase(key) ? "1" : "0");
        break;
      case Gather:
        gather(id, key, value);
        break;
      default:
        reply(id, 1, "unknown store command " + std::to_string(h.cmd));
    }
    return true;
  }

  // A key arrived: GET waiters read it, the first TAKE waiter consumes it.
  void wake(const std::string& key) {
    auto w = waiters_.find(key);
    if (w == waiters_.end()) return;
    auto& list = w->second;
    size_t i = 0;
    for (; i < list.size(); ++i) {
      auto it = kv_.find(key);
      reply(list[i].client, 0, it->second);
      if (list[i].take) {
        kv_.erase(it);
        ++i;
        break;
      }
    }
    list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(i));
    if (list.empty()) waiters_.erase(w);
  }

  void gather(uint64_t id, const std::string& key, const std::string& value) {
    uint32_t rank = 0, world = 0;
    if (value.size() < 8) return reply(id, 1, "malformed gather");
    std::memcpy(&rank, value.data(), 4);
    std::memcpy(&world, value.data() + 4, 4);
    GatherState& g = gathers_[key];
    if (g.world == 0) {
      g.world = static_cast<int>(world);
      g.parts.resize(world);
      g.clients.assign(world, 0);
    }
    std::string error;
    if (static_cast<int>(world) != g.world)
      error = "ranks disagree on the world size (" + std::to_string(g.world) + " and " + std::to_string(world) + ")";
    else if (rank >= world)
      error = "rank " + std::to_string(rank) + " is not below WORLD_SIZE=" + std::to_string(world);
    else if (g.clients[rank])
      error = "two processes joined as rank " + std::to_string(rank);
    if (!error.empty()) {  // everyone in this exchange hears it
      reply(id, 1, error);
      for (uint64_t other : g.clients)
        if (other) reply(other, 1, error);
      gathers_.erase(key);
      return;
    }
    g.parts[rank] = value.substr(8);
    g.clients[rank] = id;
    if (++g.count < g.world) return;
    std::string all;
    for (const std::string& p : g.parts) {
      uint64_t n = p.size();
      all.append(reinterpret_cast<const char*>(&n), 8);
      all += p;
    }
    std::vector<uint64_t> to = g.clients;
    gathers_.erase(key);
    for (uint64_t other : to) reply(other, 0, all);
  }

  double timeout_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  // Owned by the server thread.
  uint64_t next_id_ = 1;
  std::map<uint64_t, Client> clients_;
  std::map<std::string, std::string> kv_;
  std::map<std::string, std::vector<Waiter>> waiters_;
  std::map<std::string, GatherState> gathers_;
  std::string broken_;
};

// ---------------------------------------------------------------- client

TcpStore::TcpStore(const std::string& host, int port, bool is_server, double timeout_s, int rank,
                   const char* fn)
    : address_(host + ":" + std::to_string(port)), timeout_(timeout_s) {
  if (port < 1 || port > 65535)
    throw ValueError(errmsg(fn, "MASTER_PORT " + std::to_string(port) + " is not a TCP port (1-65535)"));
  if (host.empty()) throw ValueError(errmsg(fn, "MASTER_ADDR is empty"));
  if (timeout_s <= 0) throw ValueError(errmsg(fn, "timeout must be positive"));
  if (is_server) server_ = std::make_unique<StoreServer>(port, timeout_s, fn);
  connect_with_retry(host, port, fn);
  if (rank >= 0) {
    std::string r(4, '\0');
    int32_t v = rank;
    std::memcpy(r.data(), &v, 4);
    request(Hello, "", r, fn);
  }
}

TcpStore::~TcpStore() { close(); }

void TcpStore::connect_with_retry(const std::string& host, int port, const char* fn) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0)
    throw RuntimeError(errmsg(fn, "cannot resolve MASTER_ADDR '" + host + "': " + ::gai_strerror(rc)));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> hold(found, ::freeaddrinfo);
  auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  std::string last = "no address";
  // Rank 0 may not listen yet: retry until the deadline.
  for (;;) {
    for (addrinfo* a = found; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) {
        last = os_error(errno);
        continue;
      }
      int err = 0;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          auto slice = std::min(end, Clock::now() + std::chrono::seconds(1));
          socklen_t len = sizeof(err);
          if (wait_for(fd, POLLOUT, slice) == Io::Ok) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          else err = ETIMEDOUT;
        }
      }
      if (err == 0) {
        no_delay(fd);
        fd_ = fd;
        return;
      }
      last = os_error(err);
      ::close(fd);
    }
    if (Clock::now() >= end)
      throw RuntimeError(errmsg(fn, "could not reach the rendezvous store at " + address_ + " within " +
                                        std::to_string(timeout_) + " s (" + last +
                                        "); rank 0 listens there: check MASTER_ADDR and MASTER_PORT and "
                                        "that rank 0 is running"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string TcpStore::request(uint8_t cmd, const std::string& key, const std::string& value, const char* fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) throw RuntimeError(errmsg(fn, "the rendezvous store is closed"));
  if (broken_)
    throw RuntimeError(errmsg(fn, "an earlier wait on the rendezvous store at " + address_ +
                                      " failed; the process group is unusable"));
  auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  RequestHeader h{cmd, static_cast<uint32_t>(key.size()), value.size()};
  ReplyHeader r{};
  Io io = write_all(fd_, &h, sizeof(h), end);
  if (io == Io::Ok) io = write_all(fd_, key.data(), key.size(), end);
  if (io == Io::Ok) io = write_all(fd_, value.data(), value.size(), end);
  if (io == Io::Ok) io = read_all(fd_, &r, sizeof(r), end);
  std::string payload;
  if (io == Io::Ok) {
    payload.resize(r.len);
    io = read_all(fd_, payload.data(), payload.size(), end);
  }
  if (io != Io::Ok) {
    broken_ = true;
    if (io == Io::Late)
      throw RuntimeError(errmsg(fn, "timed out after " + std::to_string(timeout_) +
                                        " s waiting for the other ranks at the rendezvous store " + address_ +
                                        " (a rank died, hangs, never started or skipped this call)"));
    throw RuntimeError(errmsg(fn, "lost the connection to the rendezvous store at " + address_ +
                                      " (rank 0's process exited?)"));
  }
  if (r.status != 0) throw RuntimeError(errmsg(fn, payload));
  return payload;
}

void TcpStore::set(const std::string& key, const std::string& value, const char* fn) { request(Set, key, value, fn); }
std::string TcpStore::get(const std::string& key, const char* fn) { return request(Get, key, "", fn); }
std::string TcpStore::take(const std::string& key, const char* fn) { return request(Take, key, "", fn); }
bool TcpStore::check(const std::string& key, const char* fn) { return request(Check, key, "", fn) == "1"; }
bool TcpStore::remove(const std::string& key, const char* fn) { return request(Delete, key, "", fn) == "1"; }

int64_t TcpStore::add(const std::string& key, int64_t delta, const char* fn) {
  std::string v(8, '\0');
  std::memcpy(v.data(), &delta, 8);
  return std::strtoll(request(Add, key, v, fn).c_str(), nullptr, 10);
}

std::vector<std::string> TcpStore::gather(const std::string& key, int rank, int world, const std::string& part,
                                          const char* fn) {
  std::string all = request(Gather, key, pack_gather(rank, world, part), fn);
  std::vector<std::string> parts;
  size_t at = 0;
  while (at + 8 <= all.size()) {
    uint64_t n = 0;
    std::memcpy(&n, all.data() + at, 8);
    parts.push_back(all.substr(at + 8, n));
    at += 8 + n;
  }
  return parts;
}

void TcpStore::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ >= 0) {
      if (!broken_) {  // best effort: a goodbye tells rank 0 this was no death
        RequestHeader h{Bye, 0, 0};
        ReplyHeader r{};
        auto end = Clock::now() + std::chrono::seconds(2);
        if (write_all(fd_, &h, sizeof(h), end) == Io::Ok) read_all(fd_, &r, sizeof(r), end);
      }
      ::close(fd_);
      fd_ = -1;
    }
  }
  server_.reset();
}

}  // namespace pyflame::distributed::detail
