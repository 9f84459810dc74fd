// src/server/openapi.json as a string, embedded at build time (CMakeLists.txt generates
// openapi_source.cc with embed_source.cmake). Served by GET /v1/openapi.json.
#ifndef CODEBOX_SERVER_OPENAPI_H_
#define CODEBOX_SERVER_OPENAPI_H_

namespace codebox::server {

extern const char kOpenApiJson[];

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_OPENAPI_H_
