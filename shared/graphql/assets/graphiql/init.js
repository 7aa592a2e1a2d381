// The GraphiQL page's own script (shared/graphql/src/graphiql.rs inlines it after React and
// GraphiQL): endpoint, token prefill, default query, render.
(function () {
  "use strict";
  var root = document.getElementById("graphiql");
  var dialect = root.getAttribute("data-dialect");
  var base = location.pathname.replace(/\/+$/, "");
  var endpoint = location.origin + base + "/query";
  var params = new URLSearchParams(location.search);
  var token = params.get("token");
  if (token !== null) {
    params.delete("token");
    var rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
  // The token's vehicle (its `asset` claim), for a first query that returns data.
  var asset = null;
  if (token) {
    try {
      var part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      asset = JSON.parse(atob(part)).asset || null;
    } catch (e) {
      asset = null;
    }
  }
  var did = typeof asset === "string" && /^did:erc721:[0-9]+:0x[0-9a-fA-F]{40}:[0-9]+$/.test(asset) ? asset : null;
  var query;
  if (did && dialect === "telemetry") {
    query = "{\n  signalsLatest(tokenId: " + did.split(":")[4] + ") {\n    lastSeen\n    speed { timestamp value }\n  }\n}\n";
  } else if (did && dialect === "fetch") {
    query = "{\n  cloudEvents(did: \"" + did + "\", limit: 3) {\n    header { id type time }\n  }\n}\n";
  } else if (did) {
    query = "{\n  signalsLatest(subject: \"" + did + "\") {\n    lastSeen\n    speed { timestamp value }\n  }\n}\n";
  } else {
    query = "{\n  __typename\n}\n";
  }
  var intro = "# GraphiQL for dq, " + dialect + " dialect: queries go to " + endpoint + "\n" +
    "# Data queries need a token: set {\"Authorization\": \"Bearer <jwt>\"} under Headers below,\n" +
    "# or open this page with ?token=<jwt>.\n\n";
  var headers = token ? JSON.stringify({ Authorization: "Bearer " + token }, null, 2) : undefined;
  var e = React.createElement;
  ReactDOM.createRoot(root).render(
    e(GraphiQL, {
      fetcher: GraphiQL.createFetcher({ url: endpoint }),
      defaultQuery: intro + query,
      headers: headers,
      shouldPersistHeaders: false,
      defaultEditorToolsVisibility: "headers"
    }, e(GraphiQL.Logo, null, "dq · " + dialect + " dialect"))
  );
})();
