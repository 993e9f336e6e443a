// What the server answers, as JSON, for `smallville serve`'s pages: a refusal or a failure of
// any kind (the server's, a proxy's, the network's) comes back as {error: one line}, which the
// page shows as it is. null when the request was called off (`options.signal`).
async function api(url, options = {}) {
  let reply;
  try {
    reply = await fetch(url, options);
  } catch (e) {
    if (e.name === "AbortError") return null;
    return {error: `the server did not answer (${url.split("?")[0]}): is smallville serve still running?`};
  }
  try {
    const data = await reply.json();
    if (reply.ok || (data && data.error)) return data;
  } catch (e) {
    if (e.name === "AbortError") return null;
  }
  return {error: `the server answered ${reply.status} ${reply.statusText} to ${url.split("?")[0]}`};
}
