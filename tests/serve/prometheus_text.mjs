// A strict reader of the Prometheus text exposition format (version 0.0.4), for checking
// what aff-serve's /metrics answers: every line a comment (# HELP / # TYPE), a sample
// or empty; names and label names of the allowed characters; label values quoted with
// only \\, \" and \n escaped; values as Go's ParseFloat reads them (or +Inf, -Inf, NaN);
// one TYPE per family, before its samples, and a family's samples together; histograms
// with le-labelled buckets in increasing order, counts that never decrease, a +Inf
// bucket equal to _count, and a _sum. Throws an Error naming the line at the first fault.
const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const VALUE = /^(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseLabels(text, where) {
  const labels = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new Error(`${where}: label without '='`);
    const name = text.slice(i, eq);
    if (!LABEL.test(name)) throw new Error(`${where}: bad label name '${name}'`);
    if (name in labels) throw new Error(`${where}: label '${name}' repeated`);
    if (text[eq + 1] !== '"') throw new Error(`${where}: label value not quoted`);
    let j = eq + 2, value = '';
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') {
        const e = text[++j];
        if (e === '\\' || e === '"') value += e;
        else if (e === 'n') value += '\n';
        else throw new Error(`${where}: bad escape '\\${e}' in a label value`);
      } else if (text[j] === '\n') {
        throw new Error(`${where}: newline in a label value`);
      } else {
        value += text[j];
      }
    }
    if (j >= text.length) throw new Error(`${where}: unterminated label value`);
    labels[name] = value;
    i = j + 1;
    if (i < text.length) {
      if (text[i] !== ',') throw new Error(`${where}: expected ',' between labels`);
      i++;
    }
  }
  return labels;
}

// Returns {families: Map(name -> {type, help, samples: [{name, labels, value}]})}.
export function parseExposition(text) {
  if (!text.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  const families = new Map();
  const family = (name) => {
    if (!families.has(name)) families.set(name, { type: undefined, help: undefined, samples: [] });
    return families.get(name);
  };
  let current = null;  // the family whose samples are being read
  const closed = new Set();
  const lines = text.slice(0, -1).split('\n');
  lines.forEach((line, n) => {
    const where = `line ${n + 1} '${line}'`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return;  // another comment
      const [, kind, name, rest] = m;
      if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
      const f = family(name);
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`${where}: unknown type '${rest}'`);
        if (f.type) throw new Error(`${where}: second TYPE for ${name}`);
        if (f.samples.length) throw new Error(`${where}: TYPE after samples of ${name}`);
        f.type = rest;
      } else {
        if (f.help !== undefined) throw new Error(`${where}: second HELP for ${name}`);
        f.help = rest;
      }
      return;
    }
    const m = /^([^\s{]+)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$/.exec(line);
    if (!m) throw new Error(`${where}: not a sample line`);
    const [, name, labelText, value] = m;
    if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
    if (!VALUE.test(value)) throw new Error(`${where}: bad value '${value}'`);
    const labels = labelText === undefined ? {} : parseLabels(labelText, where);
    // A histogram's _bucket, _sum and _count belong to its family.
    let base = name;
    for (const suffix of ['_bucket', '_sum', '_count'])
      if (name.endsWith(suffix) && families.get(name.slice(0, -suffix.length))?.type === 'histogram')
        base = name.slice(0, -suffix.length);
    if (current !== base) {
      if (closed.has(base)) throw new Error(`${where}: samples of ${base} are not together`);
      if (current) closed.add(current);
      current = base;
    }
    family(base).samples.push({ name, labels, value: Number(value.replace('Inf', 'Infinity')) });
  });
  for (const [name, f] of families) {
    if (f.type === 'histogram') checkHistogram(name, f);
    if (f.type === 'counter' && !name.endsWith('_total')) throw new Error(`counter ${name} does not end in _total`);
  }
  return { families };
}

function checkHistogram(name, f) {
  const buckets = f.samples.filter((s) => s.name === `${name}_bucket`);
  const sum = f.samples.filter((s) => s.name === `${name}_sum`);
  const count = f.samples.filter((s) => s.name === `${name}_count`);
  if (!buckets.length || sum.length !== 1 || count.length !== 1)
    throw new Error(`histogram ${name}: needs buckets, one _sum and one _count`);
  let lastLe = -Infinity, lastCount = 0;
  for (const b of buckets) {
    if (!('le' in b.labels)) throw new Error(`histogram ${name}: a bucket without le`);
    const le = Number(b.labels.le.replace('Inf', 'Infinity'));
    if (!(le > lastLe)) throw new Error(`histogram ${name}: le ${b.labels.le} not above the bucket before`);
    if (b.value < lastCount) throw new Error(`histogram ${name}: bucket le=${b.labels.le} counts fewer than the one before`);
    lastLe = le;
    lastCount = b.value;
  }
  if (buckets.at(-1).labels.le !== '+Inf') throw new Error(`histogram ${name}: the last bucket is not le="+Inf"`);
  if (buckets.at(-1).value !== count[0].value) throw new Error(`histogram ${name}: +Inf bucket differs from _count`);
}
