// A small checker of real responses against src/server/openapi.json: the status must be one
// the route documents, and a JSON body must have the documented required properties with the
// documented types (recursively: $ref, allOf, oneOf, items, properties, enum, const).
#ifndef CODEBOX_TESTS_SERVER_OPENAPI_CHECK_H_
#define CODEBOX_TESTS_SERVER_OPENAPI_CHECK_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace codebox::testing {

class OpenApiChecker {
 public:
  // Parses server::OpenApiDocument().
  OpenApiChecker();
  // "" when the response fits; else what does not. `route` is the path pattern
  // ("/v1/boxes/{id}/exec"); content_type is the response's.
  std::string Check(std::string_view method, std::string_view route, int status,
                    std::string_view content_type, std::string_view body) const;
  // Whether `value` fits `schema` ("" when it does), for event data too.
  std::string CheckValue(const nlohmann::json& schema, const nlohmann::json& value,
                         const std::string& where) const;
  const nlohmann::json& Schema(const std::string& name) const;
  // A schema with its $ref followed.
  const nlohmann::json& Resolve(const nlohmann::json& schema) const;

 private:
  nlohmann::json doc_;
};

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_SERVER_OPENAPI_CHECK_H_
