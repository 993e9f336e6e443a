// "Why", on both pages: the account of a decision (`smallville why --json`'s) as HTML: what
// the agent did, the request it answered and the memories it recalled with their scores and
// origins. Each time cited is a link (a.seek, its data-t) that the page turns into a move of
// the clock; a query the page was given in part says how many memories it leaves out.
function nameOf(id) { return (D.agents.find(a => a.id === id) || {name: id}).name; }
function moment(t, time) { return `<a href="#" class="seek" data-t="${t}">${esc(time.slice(5, 16))}</a>`; }
function origin(o) {
  if (o.how === "told" || o.how === "said") {
    const talk = o.conversation ? ` in the conversation of ${moment(o.conversation.t, o.conversation.time)}` : "";
    return `${o.how === "told" ? "told by " + esc(nameOf(o.by)) : "said to " + esc(nameOf(o.to))}${talk}`;
  }
  if (o.how === "perceived") return `perceived in ${esc(o.where || "?")}`;
  if (o.how === "reflected") return `reflected from ${o.from.length} memories`;
  return esc(o.how);
}
function accountHtml(a) {
  let html = `<div class="answer">${moment(a.t, a.time)} <b>${esc(a.kind)}</b>: ${esc(JSON.stringify(a.data).slice(0, 200))}</div>`;
  if (a.memory && a.memory.origin) html += `<div class="kind">${esc(a.memory.text || "")}: ${origin(a.memory.origin)}</div>`;
  if (a.request && a.request.kind) {
    html += `<div class="kind">answering request #${a.request.req} (${esc(a.request.kind)}), which recalled:</div>`;
    for (const q of a.request.queries) html += `<div class="kind">for &ldquo;${esc(q.query.slice(0, 120))}&rdquo;</div><ol>` +
      q.memories.map(m => `<li class="recalled">${esc(m.text || "?")} <span class="kind">${m.score.toFixed(2)} = ` +
        `rec ${m.recency.toFixed(2)} + imp ${m.importance.toFixed(2)} + rel ${m.relevance.toFixed(2)}; ` +
        `${m.time ? moment(m.t, m.time) + ", " : ""}${origin(m.origin)}</span></li>`).join("") + "</ol>" +
      (q.more ? `<div class="kind">and ${q.more} more (smallville why)</div>` : "");
  }
  return html;
}
