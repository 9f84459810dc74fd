// The proxy's half of a box's secrets (docs/security.md, "Secrets"): the box holds only
// placeholders ("<CODEBOX_SECRET:NAME>"), and a request head bound for one of a secret's hosts
// gets the value in their place, in its request line and headers; a head that carries the
// placeholder of a secret to any other host is never sent. The values live here, on the host.
//
//   ASSIGN_OR_RETURN(auto injector, net::SecretInjector::Make(options.secrets));
//   if (injector.IsSecretHost(host, port)) intercept the TLS ...
//   auto head = injector.Rewrite(request->upstream_head, host, port, &record.secrets);
//   if (!head.ok()) refuse with head.status().message() (it names no value)
#ifndef CODEBOX_NET_SECRETS_H_
#define CODEBOX_NET_SECRETS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"
#include "net/egress_policy.h"

namespace codebox::net {

class SecretInjector {
 public:
  SecretInjector() = default;
  // Each secret's hosts as allowlist patterns; the options were checked, so an error is not
  // expected (it names the entry).
  static StatusOr<SecretInjector> Make(const std::vector<Secret>& secrets);

  bool empty() const { return secrets_.empty(); }
  // Whether some secret may be sent to `host` (as the box wrote it) on `port`: such connections
  // are intercepted and their heads rewritten.
  bool IsSecretHost(std::string_view host, uint16_t port) const;

  // `head` (a request line and headers, through the blank line) with each placeholder of a
  // secret meant for host:port replaced by its value: as written in headers, percent-encoded in
  // the request target, inside the base64 of "Authorization: Basic" too. The percent-encoded
  // placeholder (%3CCODEBOX_SECRET%3ANAME%3E, as URL libraries write it) counts as one.
  // `injected` gets the names of the secrets put in. A placeholder of a secret not meant for
  // host:port is kPermissionDenied, saying which secret and where it may go.
  StatusOr<std::string> Rewrite(std::string_view head, std::string_view host, uint16_t port,
                                std::vector<std::string>* injected) const;

 private:
  struct Rule {
    std::string name;
    std::string value;
    std::vector<HostPattern> hosts;
  };
  const Rule* Find(std::string_view name) const;
  bool Allows(const Rule& rule, std::string_view host, uint16_t port) const;
  // Replaces the placeholders in `text`; `in_target`: percent-encode the values.
  Status ReplaceIn(std::string& text, bool in_target, std::string_view host, uint16_t port,
                   std::vector<std::string>* injected) const;

  std::vector<Rule> secrets_;
};

// Watches bytes a box sends on a connection where no placeholder may go (a body, a tunnel to a
// host no secret is for) for the start of one, "<CODEBOX_SECRET:" or its percent-encoded
// form, across the chunks the bytes come in.
class PlaceholderScanner {
 public:
  // True once a placeholder's start has been seen, in this chunk or with the end of the last.
  bool Feed(std::string_view bytes);

 private:
  std::string tail_;  // the last bytes seen, which may begin a placeholder split across chunks
};

}  // namespace codebox::net

#endif  // CODEBOX_NET_SECRETS_H_
