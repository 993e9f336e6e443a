// The town on a canvas: tiles, objects, area names, agents and what they say. Shared by the
// replay page and the live page of `smallville serve` (each inlines this file).
function hue(text) { let h = 0; for (const ch of text) h = (h * 31 + ch.charCodeAt(0)) % 360; return h; }
function sector(area) { return area.split(" / ")[0]; }
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }
// The index of the last entry of a time-sorted list at or before t (-1: none).
function before(list, t) {
  let lo = 0, hi = list.length - 1, best = -1;
  while (lo <= hi) { const mid = (lo + hi) >> 1; if (list[mid][0] <= t) { best = mid; lo = mid + 1; } else hi = mid - 1; }
  return best;
}
// Where a track ([t, column, row] entries) is at time t.
function trackAt(track, t) {
  const i = Math.max(0, before(track, t));
  return [track[i][1], track[i][2]];
}
function initials(name) { return name.split(" ").map(w => w[0]).join(""); }
// An agent's colour: one of 36 hues, so a crowd is drawn with few changes of colour.
function colorOf(id) { return `hsl(${Math.round(hue(id) / 10) * 10 % 360}, 70%, 40%)`; }
const CROWD = 250;       // more agents in view than this: squares without initials, by colour

class Town {
  constructor(map, agents) {
    this.map = map; this.agents = agents;
    this.W = map.rows[0].length; this.H = map.rows.length;
    this.T = Math.max(6, Math.min(12, Math.floor(1100 / this.W)));
    this.width = this.W * this.T; this.height = this.H * this.T;
    this.background = this.drawMap();
  }
  area(c, r) { return this.map.legend[this.map.rows[r][c]] || ""; }
  // The map without anyone on it, drawn once.
  drawMap() {
    const {W, H, T} = this, canvas = document.createElement("canvas");
    canvas.width = this.width; canvas.height = this.height;
    const g = canvas.getContext("2d"), spots = new Map();
    for (let r = 0; r < H; r++) for (let c = 0; c < W; c++) {
      const area = this.area(c, r);
      if (!area || area === "wall") g.fillStyle = "#5c5650";
      else g.fillStyle = `hsl(${hue(sector(area))}, 45%, ${area.includes("street") ? 88 : 78}%)`;
      g.fillRect(c * T, r * T, T, T);
      if (!area || area === "wall" || area.includes("street")) continue;
      const s = spots.get(sector(area)) || [0, 0, 0];
      s[0] += c; s[1] += r; s[2] += 1; spots.set(sector(area), s);
    }
    g.fillStyle = "#6b4f2a";
    for (const [, c, r] of this.map.objects) g.fillRect(c * T + T / 4, r * T + T / 4, T / 2, T / 2);
    g.font = `${Math.max(9, T)}px system-ui`; g.fillStyle = "rgba(0,0,0,0.55)"; g.textAlign = "center";
    for (const [name, [sc, sr, n]] of spots) g.fillText(name, (sc / n + 0.5) * T, (sr / n + 0.5) * T);
    return canvas;
  }
  // What is said in the tick up to t: speech is a time-sorted list of [t, speaker, listener, text].
  saying(speech, t, tick) {
    const out = [];
    for (let i = before(speech, t); i >= 0 && t - speech[i][0] < tick; i--) out.push(speech[i]);
    return out.reverse();
  }
  // Each agent's dot and initials, drawn once into one canvas (an atlas): a frame then copies
  // one small image per agent in view instead of drawing a path and text for each.
  sprites() {
    if (this.atlas) return this.atlas;
    const T = this.T, F = Math.max(10, T + 2), font = `${F}px system-ui`, ox = Math.ceil(0.1 * T) + 1;
    const measure = document.createElement("canvas").getContext("2d");
    measure.font = font;
    const cells = {}, height = F + Math.ceil(1.1 * T) + 2;
    let x = 0, y = 0;
    for (const a of this.agents) {
      a.initials = initials(a.name);
      const w = ox + T + Math.ceil(measure.measureText(a.initials).width) + 2;
      if (x + w > 2048) { x = 0; y += height; }
      cells[a.id] = [x, y, w]; x += w;
    }
    const atlas = document.createElement("canvas");
    atlas.width = 2048; atlas.height = y + height;
    const g = atlas.getContext("2d");
    g.font = font;
    for (const a of this.agents) {
      const [cx, cy] = cells[a.id], x0 = cx + ox, y0 = cy + F;
      g.beginPath();
      g.arc(x0 + T / 2, y0 + T / 2, T * 0.6, 0, 2 * Math.PI);
      g.fillStyle = colorOf(a.id);
      g.fill();
      g.fillStyle = "#111";
      g.fillText(a.initials, x0 + T, y0);
    }
    this.atlas = {canvas: atlas, cells, ox, oy: F, height};
    return this.atlas;
  }
  // Draw the part of the town in `view` ({x, y, w, h}, pixels of the whole map) on ctx, whose
  // canvas is the view's size: the agents at `positions` ({id: [column, row]}), what is said;
  // with `ground` false, on a clear canvas laid over the map (`background`) shown beneath.
  draw(ctx, view, positions, said, selected, ground = true) {
    const T = this.T, {canvas: atlas, cells, ox, oy, height} = this.sprites();
    const x0 = view.x - 4 * T, y0 = view.y - 2 * T, x1 = view.x + view.w + T, y1 = view.y + view.h + T;
    if (ground) {
      ctx.fillStyle = "#5c5650"; ctx.fillRect(0, 0, view.w, view.h);
      ctx.drawImage(this.background, view.x, view.y, view.w, view.h, 0, 0, view.w, view.h);
    } else ctx.clearRect(0, 0, view.w, view.h);
    ctx.save();
    ctx.translate(-view.x, -view.y);
    const seen = [];
    for (const a of this.agents) {
      const [c, r] = positions[a.id], x = c * T, y = r * T;
      if (x >= x0 && x <= x1 && y >= y0 && y <= y1) seen.push(a);
    }
    if (seen.length > CROWD) {                 // a crowd: one square each, a colour at a time
      if (!this.colors) {
        this.colors = new Map();
        for (const a of this.agents) this.colors.set(colorOf(a.id), [...(this.colors.get(colorOf(a.id)) || []), a]);
      }
      const shown = new Set(seen);
      for (const [color, members] of this.colors) {
        ctx.fillStyle = color;
        for (const a of members) if (shown.has(a)) { const [c, r] = positions[a.id]; ctx.fillRect(c * T, r * T, T, T); }
      }
    } else for (const a of seen) {
      const [c, r] = positions[a.id], [sx, sy, w] = cells[a.id];
      ctx.drawImage(atlas, sx, sy, w, height, c * T - ox, r * T - oy, w, height);
    }
    if (selected && positions[selected]) {
      const [c, r] = positions[selected];
      ctx.beginPath();
      ctx.arc(c * T + T / 2, r * T + T / 2, T * 0.9, 0, 2 * Math.PI);
      ctx.fillStyle = colorOf(selected);
      ctx.fill();
      ctx.lineWidth = 2; ctx.strokeStyle = "#000"; ctx.stroke();
    }
    ctx.font = `${Math.max(10, T + 2)}px system-ui`;
    for (const [, a, , text] of said) {
      if (!positions[a]) continue;
      const [c, r] = positions[a];
      const line = text.length > 60 ? text.slice(0, 57) + "..." : text;
      const w = ctx.measureText(line).width + 8;
      ctx.fillStyle = "rgba(255,255,255,0.92)";
      ctx.fillRect(c * T + T, r * T - 2 * T - 6, w, T + 8);
      ctx.fillStyle = "#000";
      ctx.fillText(line, c * T + T + 4, r * T - T - 2);
    }
    ctx.restore();
  }
  // The agent nearest the map pixel (x, y), within three tiles.
  nearest(positions, x, y) {
    let best = null, dist = 3;
    for (const [id, [c, r]] of Object.entries(positions)) {
      const d = Math.hypot(c + 0.5 - x / this.T, r + 0.5 - y / this.T);
      if (d < dist) { best = id; dist = d; }
    }
    return best;
  }
}

// The controls' play button (controls.html): moves the slider on at the speed chosen, to `end()`.
function player(end) {
  const button = document.getElementById("play"), speed = document.getElementById("speed");
  const slider = document.getElementById("slider");
  let timer = null;
  button.addEventListener("click", () => {
    if (timer) { clearInterval(timer); timer = null; button.innerHTML = "&#9654;"; return; }
    button.innerHTML = "&#10074;&#10074;";
    timer = setInterval(() => {
      slider.value = Math.min(end(), Number(slider.value) + Number(speed.value) / 10);
      slider.dispatchEvent(new Event("input"));
      if (Number(slider.value) >= end()) button.click();
    }, 100);
  });
}
