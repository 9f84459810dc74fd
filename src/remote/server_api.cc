#include "remote/server_api.h"

#include "base/json_fields.h"
#include "codebox/options.h"

namespace codebox::remote {

using nlohmann::json;

namespace {

// JSON answers carry an exec's output (up to output_limit_bytes a stream, escaped): the
// client's default cap, well above that.
const uint64_t kMaxJsonAnswerBytes = http::ClientOptions{}.max_response_bytes;

bool IsSuccess(int status) { return status >= 200 && status < 300; }

}  // namespace

StatusOr<ServerApi> ServerApi::Open(const std::string& server, std::string token) {
  auto address = http::ParseAddress(server);
  if (!address.ok()) return address.status().WithContext("option server");
  return ServerApi(std::move(*address), std::move(token));
}

http::Client ServerApi::MakeClient(uint64_t max_response_bytes) const {
  http::ClientOptions options;
  options.token = token_;
  options.max_response_bytes = max_response_bytes;
  return http::Client(address_, options);
}

Status ServerApi::Explain(const Status& st, std::string_view what) const {
  if (st.ok()) return st;
  std::string context(what);
  // Without an answer, say which server did not answer.
  if (st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kIoError ||
      st.code() == StatusCode::kDeadlineExceeded) {
    context += " (server " + address_.ToString() + ")";
  }
  return st.WithContext(context);
}

StatusOr<http::ClientResponse> ServerApi::Call(const http::ClientRequest& request,
                                               uint64_t max_response_bytes,
                                               std::string_view what) const {
  auto response = MakeClient(max_response_bytes).Send(request);
  if (!response.ok()) return Explain(response.status(), what);
  if (!IsSuccess(response->status)) {
    return http::StatusFromErrorResponse(*response).WithContext(what);
  }
  return response;
}

StatusOr<json> ServerApi::CallJson(std::string method, std::string target, std::string body,
                                   std::chrono::milliseconds timeout, std::string_view what) const {
  http::ClientRequest request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.body = std::move(body);
  request.timeout = timeout;
  ASSIGN_OR_RETURN(http::ClientResponse response, Call(request, kMaxJsonAnswerBytes, what));
  return base::ParseJsonObject(response.body, "the server's answer to " + std::string(what));
}

Status ServerApi::CallNoContent(std::string method, std::string target, std::string body,
                                std::chrono::milliseconds timeout, std::string_view what,
                                std::string content_type) const {
  http::ClientRequest request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.body = std::move(body);
  request.content_type = std::move(content_type);
  request.timeout = timeout;
  auto response = Call(request, kMaxJsonAnswerBytes, what);
  return response.ok() ? Status::Ok() : response.status();
}

StatusOr<http::ClientResponse> ServerApi::CallEvents(http::ClientRequest request,
                                                     const http::Client::EventCallback& on_event,
                                                     std::string_view what) const {
  request.headers.emplace_back("Accept", "text/event-stream");
  auto response = MakeClient(kMaxJsonAnswerBytes).SendForEvents(request, on_event);
  if (!response.ok()) return Explain(response.status(), what);
  if (!IsSuccess(response->status)) {
    return http::StatusFromErrorResponse(*response).WithContext(what);
  }
  return response;
}

StatusOr<std::string> DumpJson(const json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const json::type_error&) {
    return InvalidArgument(std::string(what) +
                           ": a box on a server takes argv, code, the environment and stdin as "
                           "JSON text, which must be UTF-8; send bytes as a file (WriteFile) "
                           "instead");
  }
}

}  // namespace codebox::remote
