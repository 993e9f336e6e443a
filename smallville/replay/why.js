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

// A probe's spread (`Run.probe_tree`'s hops): who told whom, when, as nested lists (each time a
// link), and over the town: each agent who knows the news ringed where it learned it, with an
// arrow from where its teller had learned it: the news's path across the town, growing with
// the clock. Both use the page's `position`, `stamp`, `ctx` and `town`.
function spreadHtml(s) {
  return `<div class="kind">${count(s.hops.length, "agent")} came to know it; depth ` +
    `${s.depth === null ? "unknown" : s.depth}</div>` + branches(s.hops);
}
function branches(hops) {
  const learners = new Set(hops.map(h => h.agent)), below = new Map(), seen = new Set();
  for (const h of hops) {
    const up = h.from && learners.has(h.from) ? h.from : "";
    below.set(up, [...(below.get(up) || []), h]);
  }
  const branch = up => "<ul>" + (below.get(up) || []).filter(h => !seen.has(h.agent) && seen.add(h.agent)).map(h =>
    `<li class="hop" data-agent="${esc(h.agent)}" data-from="${esc(h.from || "")}">${esc(nameOf(h.agent))} ` +
    `${moment(h.t, h.time)}${h.from ? ` <span class="kind">${esc(h.via)}</span>` : ` <span class="kind">(${esc(h.source)})</span>`}` +
    branch(h.agent) + "</li>").join("") + "</ul>";
  return branch("");
}
function drawSpread(hops, view, t) {
  const T = town.T, at = new Map();
  for (const h of hops) at.set(h.agent, position(h.agent, h.t).map(v => v * T + T / 2));
  ctx.save();
  ctx.translate(-view.x, -view.y);
  ctx.strokeStyle = ctx.fillStyle = "#d1495b"; ctx.lineWidth = 2; ctx.font = `${Math.max(10, T)}px system-ui`;
  let drawnHops = 0;
  for (const h of hops) {
    if (h.t > t) continue;
    const [x, y] = at.get(h.agent);
    ctx.beginPath(); ctx.arc(x, y, T, 0, 2 * Math.PI); ctx.stroke();
    ctx.fillText(`${nameOf(h.agent).split(" ")[0]} ${stamp(h.t).slice(11)}`, x + T + 2, y - T);
    if (h.from && at.has(h.from)) {
      const [x0, y0] = at.get(h.from), a = Math.atan2(y - y0, x - x0);
      ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x, y); ctx.stroke();
      ctx.beginPath(); ctx.moveTo(x - T * Math.cos(a), y - T * Math.sin(a));          // an arrowhead at the ring
      ctx.lineTo(x - 2 * T * Math.cos(a - 0.4), y - 2 * T * Math.sin(a - 0.4));
      ctx.lineTo(x - 2 * T * Math.cos(a + 0.4), y - 2 * T * Math.sin(a + 0.4)); ctx.fill();
    }
    drawnHops++;
  }
  ctx.restore();
  return drawnHops;
}
