#include "tests/remote/fake_server.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "base/fs.h"
#include "http/address.h"

namespace codebox::testing {

using nlohmann::json;

FakeServer::FakeServer() {
  auto dir = base::MakeTempDir(base::TempRoot(), "codebox-remote-test-");
  if (!dir.ok()) {
    ADD_FAILURE() << dir.status().ToString();
    return;
  }
  dir_ = *dir;
  address_ = "unix:" + dir_ + "/codebox.sock";
  http::ServerOptions options;
  options.listen = {*http::ParseAddress(address_)};
  auto server = std::make_unique<http::Server>(options, this);
  if (Status st = server->Start(); !st.ok()) {
    ADD_FAILURE() << "start the fake server: " << st.ToString();
    return;
  }
  server_ = std::move(server);
  OnJson("POST", "/v1/boxes", 201,
         {{"id", kBoxId},
          {"image", "python"},
          {"driver", "jail"},
          {"limits", {"memory 512 MiB (cgroup v2)"}},
          {"limits_not_enforced", json::array()},
          {"state", "idle"}});
  On("DELETE", kBoxPath, [](const http::Request&, http::Exchange& e) { Respond(e, 204, ""); });
}

FakeServer::~FakeServer() {
  if (server_) server_->Stop(std::chrono::milliseconds(2000));
  if (!dir_.empty()) (void)base::RemoveTree(dir_);
}

void FakeServer::On(const std::string& method, const std::string& path, Route route) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_[{method, path}] = std::move(route);
}

void FakeServer::OnJson(const std::string& method, const std::string& path, int status,
                        const json& body) {
  On(method, path,
     [status, body](const http::Request&, http::Exchange& e) { RespondJson(e, status, body); });
}

void FakeServer::OnEvents(const std::string& method, const std::string& path,
                          std::vector<std::pair<std::string, std::string>> events) {
  On(method, path, [events](const http::Request&, http::Exchange& e) {
    if (!e.BeginEvents(200).ok()) return;
    for (const auto& [event, data] : events) {
      if (!e.SendEvent(event, data).ok()) return;
    }
  });
}

std::vector<http::Request> FakeServer::requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

json FakeServer::LastBody(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = requests_.rbegin(); it != requests_.rend(); ++it) {
    if (it->path == path) return json::parse(it->body, nullptr, false);
  }
  return nullptr;
}

void FakeServer::Handle(const http::Request& request, http::Exchange& exchange) {
  Route route;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(request);
    auto it = routes_.find({request.method, request.path});
    if (it != routes_.end()) route = it->second;
  }
  if (!route) {
    (void)exchange.Respond(
        http::ErrorResponse(404, "not_found", "no route " + request.method + " " + request.path));
    return;
  }
  route(request, exchange);
}

void Respond(http::Exchange& exchange, int status, std::string body, std::string content_type) {
  http::Response response;
  response.status = status;
  response.content_type = std::move(content_type);
  response.body = std::move(body);
  (void)exchange.Respond(std::move(response));
}

void RespondJson(http::Exchange& exchange, int status, const json& j) {
  Respond(exchange, status, j.dump());
}

std::string TarEntry(const std::string& name, const std::string& data, char type) {
  char h[512] = {};
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(h + 100, 8, "%07o", type == '5' ? 0755u : 0644u);
  std::snprintf(h + 108, 8, "%07o", 0u);
  std::snprintf(h + 116, 8, "%07o", 0u);
  std::snprintf(h + 124, 12, "%011o", static_cast<unsigned>(data.size()));
  std::snprintf(h + 136, 12, "%011o", 0u);
  std::memset(h + 148, ' ', 8);
  h[156] = type;
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 7, "%06o", sum);
  h[155] = ' ';
  std::string out(h, sizeof h);
  out += data;
  out.append((512 - data.size() % 512) % 512, '\0');
  return out;
}

std::string TarEnd() { return std::string(1024, '\0'); }

}  // namespace codebox::testing
