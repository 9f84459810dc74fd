// Server and Client together over a unix socket and loopback TCP: round trips, target
// decoding, keep-alive, tokens, and what the server answers by itself.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "http/beast_request.h"
#include "http/test_handler.h"

namespace codebox::http {
namespace {

using testing::Get;
using testing::Post;
using testing::StartTestServer;
using testing::TestHandler;

TEST(ServerTest, RoundTripOnBothTransports) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  EXPECT_NE(t->tcp_address.port, 0);
  for (const Client& client : {t->UnixClient(), t->TcpClient()}) {
    ClientRequest r = Post("/echo?x=1", "hello");
    r.headers.push_back({"X-Test", "yes"});
    auto resp = client.Send(r);
    ASSERT_TRUE(resp.ok()) << client.address().ToString() << ": " << resp.status().ToString();
    EXPECT_EQ(resp->status, 200);
    EXPECT_EQ(resp->body, "POST /echo\nquery x=1;\nx-test: yes\nbody: hello");
    EXPECT_EQ(resp->headers["content-type"], "text/plain");
    EXPECT_EQ(resp->headers["x-echo"], "1");
    EXPECT_EQ(resp->headers["x-request-id"].substr(0, 2), "r-");
  }
  EXPECT_EQ(handler.handled, 2);
}

TEST(ServerTest, UnixSocketModeAndRemovalOnStop) {
  TestHandler handler;
  ServerOptions o;
  o.unix_socket_mode = 0600;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  struct stat st {};
  ASSERT_EQ(lstat(t->unix_address.path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  t->server->Stop(std::chrono::seconds(1));
  EXPECT_NE(lstat(t->unix_address.path.c_str(), &st), 0) << "socket file left after Stop";
}

TEST(ServerTest, DecodesPathAndQuery) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  std::string target =
      "/ec%68o?" + EncodeQuery({{"path", "/work/a b&c=d"}, {"e", "ü+%"}}) + "&flag&plus=a+b";
  auto resp = t->UnixClient().Send(Get(target));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->body,
            "GET /echo\nquery e=ü+%; flag=; path=/work/a b&c=d; plus=a b;\nx-test: \nbody: ");

  for (const char* bad : {"/echo%zz", "/echo%00", "/echo?x=%4", "/echo%"}) {
    auto r = t->UnixClient().Send(Get(bad));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_NE(r->body.find("\"invalid_argument\""), std::string::npos) << r->body;
  }
}

TEST(ServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  namespace net = boost::asio;
  namespace bhttp = boost::beast::http;
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  socket.connect({net::ip::make_address("127.0.0.1"), t->tcp_address.port});
  boost::beast::flat_buffer buffer;
  for (int i = 0; i < 3; ++i) {
    bhttp::request<bhttp::string_body> req(bhttp::verb::get, "/echo?i=" + std::to_string(i), 11);
    req.set(bhttp::field::host, "x");
    bhttp::write(socket, req);
    bhttp::response<bhttp::string_body> resp;
    bhttp::read(socket, buffer, resp);
    EXPECT_EQ(resp.result_int(), 200);
    EXPECT_NE(resp.body().find("i=" + std::to_string(i)), std::string::npos);
    EXPECT_TRUE(resp.keep_alive());
  }
  EXPECT_EQ(t->server->stats().connections_open, 1u);
}

TEST(ServerTest, ExpectContinueGetsAnInterimAnswer) {
  namespace net = boost::asio;
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  socket.connect({net::ip::make_address("127.0.0.1"), t->tcp_address.port});
  net::write(socket, net::buffer(std::string("POST /echo HTTP/1.1\r\nHost: x\r\n"
                                             "Content-Length: 4\r\nExpect: 100-continue\r\n\r\n")));
  std::string got(25, '\0');
  net::read(socket, net::buffer(got));
  EXPECT_EQ(got, "HTTP/1.1 100 Continue\r\n\r\n");
  net::write(socket, net::buffer(std::string("body")));
  boost::beast::flat_buffer buffer;
  boost::beast::http::response<boost::beast::http::string_body> resp;
  boost::beast::http::read(socket, buffer, resp);
  EXPECT_EQ(resp.result_int(), 200);
  EXPECT_NE(resp.body().find("body: body"), std::string::npos) << resp.body();
}

TEST(ServerTest, TokensAreRequiredExceptOnPublicPaths) {
  TestHandler handler;
  ServerOptions o;
  o.tokens = {"first-token", "second"};
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  for (const std::string& token : {std::string(), std::string("wrong"),
                                   std::string("first-token-x"), std::string("first-toke")}) {
    ClientOptions co;
    co.token = token;
    auto resp = t->TcpClient(co).Send(Get("/echo"));
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_EQ(resp->status, 401) << "token '" << token << "'";
    EXPECT_EQ(resp->headers["www-authenticate"], "Bearer");
    EXPECT_NE(resp->body.find("\"unauthenticated\""), std::string::npos);
    EXPECT_FALSE(resp->headers["x-request-id"].empty());
    Status st = StatusFromErrorResponse(*resp);
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  }
  EXPECT_EQ(handler.handled, 0);
  for (const char* token : {"first-token", "second"}) {
    ClientOptions co;
    co.token = token;
    auto resp = t->UnixClient(co).Send(Get("/echo"));
    ASSERT_TRUE(resp.ok());
    EXPECT_EQ(resp->status, 200) << token;
  }
  auto health = t->UnixClient().Send(Get("/healthz"));
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  EXPECT_GE(t->server->stats().rejected_requests, 4u);
}

// E2B's SDKs send their key as X-API-KEY; and requests the handler authenticates itself (a
// sandbox's own access token) pass without a server token, and only those.
TEST(ServerTest, ApiKeyHeaderAndHandlerAuthenticatedRequests) {
  TestHandler handler;
  ServerOptions o;
  o.tokens = {"first-token", "second"};
  o.handler_authenticates = [](const Request& r) { return r.headers.contains("x-own-token"); };
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  auto with = [&](std::string name, std::string value) {
    ClientRequest r = Get("/echo");
    r.headers.emplace_back(std::move(name), std::move(value));
    auto resp = t->TcpClient().Send(r);
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    return resp.ok() ? resp->status : 0;
  };
  EXPECT_EQ(with("X-API-KEY", "second"), 200);
  EXPECT_EQ(with("X-API-KEY", "secon"), 401);
  EXPECT_EQ(with("X-API-KEY", ""), 401);
  EXPECT_EQ(with("X-Own-Token", "anything"), 200) << "the handler checks this one";
  EXPECT_EQ(with("X-Other", "anything"), 401);
}

TEST(ServerTest, NonLoopbackTcpWithoutTokenIsRefusedAtStart) {
  TestHandler handler;
  ServerOptions o;
  o.listen = {*ParseAddress("0.0.0.0:0")};
  Server server(o, &handler);
  Status st = server.Start();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--token-file"), std::string::npos) << st.message();

  o.tokens = {"t"};
  Server with_token(o, &handler);
  EXPECT_TRUE(with_token.Start().ok());
  with_token.Stop(std::chrono::milliseconds(0));
}

TEST(ServerTest, HandlerThatDoesNotAnswerOrThrowsGets500) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  for (const char* path : {"/noanswer", "/throw"}) {
    auto resp = t->UnixClient().Send(Get(path));
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_EQ(resp->status, 500) << path;
    EXPECT_EQ(StatusFromErrorResponse(*resp).code(), StatusCode::kInternal);
  }
  auto after = t->UnixClient().Send(Get("/echo"));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->status, 200);
}

TEST(ServerTest, ErrorResponseMapsStatusCodes) {
  EXPECT_EQ(ErrorResponse(NotFound("x")).status, 404);
  EXPECT_EQ(ErrorResponse(InvalidArgument("x")).status, 400);
  EXPECT_EQ(ErrorResponse(DeadlineExceeded("x")).status, 504);
  EXPECT_EQ(ErrorResponse(FailedPrecondition("x")).status, 409);
  EXPECT_EQ(ErrorResponse(LimitExceeded("x")).status, 413);
  EXPECT_EQ(ErrorResponse(BoxCrashed("x")).status, 502);
  EXPECT_EQ(ErrorResponse(IoError("x")).status, 500);
  Response r = ErrorResponse(ResourceExhausted("full \"quoted\"\n"));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(
      r.body,
      "{\"error\": {\"code\": \"resource_exhausted\", \"message\": \"full \\\"quoted\\\"\\n\"}}");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  ClientResponse back{429, {}, r.body};
  Status st = StatusFromErrorResponse(back);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(), "full \"quoted\"\n");
  EXPECT_EQ(StatusFromErrorResponse({502, {}, "<html>bad gateway"}).message(),
            "502: <html>bad gateway");
}

// A message may quote a client's bytes (a path, a header) that are not UTF-8: the body is still
// JSON (each such byte U+FFFD), and well-formed UTF-8 is kept as it is.
TEST(ServerTest, ErrorResponseIsJsonWhateverTheMessageHolds) {
  const std::string bad = "no box 'b-01\xd7x\xff\xc0\xaf\xed\xa0\x80\xe2\x82' (caf\xc3\xa9)";
  Response r = ErrorResponse(NotFound(bad));
  auto body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(body.is_discarded()) << r.body;
  EXPECT_EQ(body["error"]["message"],
            "no box 'b-01\ufffdx\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd' "
            "(caf\u00e9)");
}

// What connection.cc and the request fuzzer share (http/beast_request.h), without a socket.
TEST(ServerTest, BeastRequestParsesAndBuildsAsAConnectionDoes) {
  auto parse = [](std::string_view bytes, BeastParser* parser) {
    LimitParser(*parser, 1024, 64);
    boost::system::error_code ec;
    size_t used = parser->put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    while (!ec && !parser->is_done() && used < bytes.size()) {
      used += parser->put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    }
    return ec;
  };
  {
    BeastParser parser;
    ASSERT_FALSE(parse("POST /a%20b?x=1&y HTTP/1.1\r\nHost: h\r\nX-Two: 1\r\nx-two: 2\r\n"
                       "Authorization: Bearer t2\r\nContent-Length: 2\r\n\r\n{}",
                       &parser));
    ASSERT_TRUE(parser.is_done());
    EXPECT_TRUE(CheckFraming(parser).ok());
    Request request;
    ASSERT_TRUE(BuildRequest(parser.release(), {"t1", "t2"}, &request).ok());
    EXPECT_EQ(request.method, "POST");
    EXPECT_EQ(request.path, "/a b");
    EXPECT_EQ(request.query, (std::map<std::string, std::string>{{"x", "1"}, {"y", ""}}));
    EXPECT_EQ(request.Header("x-two"), "1, 2");
    EXPECT_EQ(request.body, "{}");
    EXPECT_EQ(request.token, 1);
  }
  {
    BeastParser parser;
    ASSERT_FALSE(parse("GET nowhere HTTP/1.1\r\n\r\n", &parser));
    Request request;
    EXPECT_EQ(BuildRequest(parser.release(), {}, &request).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(request.token, -1);
  }
  {
    BeastParser parser;  // past the head's limit
    EXPECT_EQ(parse("GET / HTTP/1.1\r\nX: " + std::string(2000, 'x') + "\r\n\r\n", &parser),
              boost::beast::http::error::header_limit);
  }
  {
    BeastParser parser;  // past the body's limit
    EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n", &parser),
              boost::beast::http::error::body_limit);
  }
  {
    BeastParser parser;  // a chunk's extensions past kMaxChunkExtension
    std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;" +
                          std::string(kMaxChunkExtension, 'e') + "\r\n{}\r\n0\r\n\r\n";
    EXPECT_EQ(parse(chunked, &parser), boost::beast::http::error::bad_chunk_extension);
  }
  {
    BeastParser parser;  // a Transfer-Encoding that does not end in chunked
    ASSERT_FALSE(parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", &parser));
    ASSERT_TRUE(parser.is_header_done());
    EXPECT_EQ(CheckFraming(parser).code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace codebox::http
