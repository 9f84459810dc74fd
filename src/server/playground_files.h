// The playground's files (src/server/playground/), embedded at build time (CMakeLists.txt
// generates playground_*_source.cc with embed_source.cmake). Served at / and /playground/.
#ifndef CODEBOX_SERVER_PLAYGROUND_FILES_H_
#define CODEBOX_SERVER_PLAYGROUND_FILES_H_

namespace codebox::server {

extern const char kPlaygroundHtml[];
extern const char kPlaygroundJs[];
extern const char kPlaygroundCss[];

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_PLAYGROUND_FILES_H_
