"""YAML texts the loader's tests read: every manifest of the repository and the real corpus, and
texts that exercise what YAML 1.1 and libyaml do at the edges."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import CORPUS

REPO = Path(__file__).resolve().parent.parent


def manifests() -> list[Path]:
    roots = [
        REPO / "gpupolicy" / "rules" / "examples",
        REPO / "tests" / "data" / "corpus",
        REPO / "examples",
        CORPUS,
    ]
    found = [path for root in roots if root.is_dir() for path in sorted(root.rglob("*")) if path.is_file()]
    return [path for path in found if path.suffix in {".yaml", ".yml", ".json"}]


TRICKY = {
    "yaml 1.1 scalars": (
        "a: yes\nb: No\nc: on\nd: OFF\ne: y\nf: 0755\ng: 0x1F\nh: 1:30\ni: 1_000\nj: ~\nk: null\nl:\n"
        "m: 'yes'\nn: \"0755\"\no: .inf\np: -0.5e+3\nu: -.5e3\nq: 2024-01-01\nr: 2024-01-01 10:00:00\ns: =\nt: 0b101\n"
    ),
    "merge keys": (
        "base: &base {cpu: 1, memory: 2Gi}\nmore: &more {gpu: 1, cpu: 9}\n"
        "one:\n  <<: *base\n  cpu: 4\ntwo:\n  <<: [*more, *base]\n  extra: x\n"
        "three:\n  cpu: 5\n  <<: *base\n  <<: *more\nfour: {<<: {<<: *base, deep: 1}}\n"
    ),
    "aliases in lists": "x: &x [1, {a: &y {b: 2}}]\ny: [*x, *x, *y]\nz: *y\n",
    "duplicates": "a: 1\nb:\n  c: 1\n  c: 2\n  c: 3\na: 2\nlist:\n  - {k: 1, k: 2}\n  - k: 1\n    k: 3\n",
    "non-string keys": "1: one\ntrue: t\n? [a, b]\n: list key\n? {m: 1}\n: map key\n0x10: hex\n~: none\n",
    "block and quoted scalars": (
        'a: |\n  one\n  two\nb: >-\n  folded\n  text\n"c\n  d": 1\ne: "multi\n  line"\n'
        "f:\n  - |\n    item\n  - plain\n    continued\n"
    ),
    "flow style": "{apiVersion: v1, kind: Pod, metadata: {name: x}, spec: {containers: [{name: c, image: i}]}}\n",
    "kind list": (
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, name: b}\n"
        "- &p\n  apiVersion: v1\n  kind: Pod\n  metadata: {name: c}\n- *p\n"
    ),
    "list with merged items": "defaults: &d {items: [{kind: Pod}]}\nkind: PodList\n<<: *d\n",
    "many documents": "a: 1\n---\n---\n# only a comment\n---\nb: [1, 2]\n...\n---\nc: {d: e}\n",
    "broken stream": "a: 1\n---\nb: [1,\n---\nc: 3\n---\nd: !!int x\n---\ne: {f: g}\n",
    "tags": "a: !!str 123\nb: !custom {x: 1}\nc: !!binary aGVsbG8=\nd: !Ref name\ne: ! yes\n",
    "crlf": "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: x\r\n  labels: {a: b}\r\n",
    "lone cr, nel, ls, ps": 'a: "x\ry"\nb: "p\x85q"\nc: "r\u2028s"\nd: "t\u2029u"\ne:\n  f: [1, 2]\n',
    "a byte-order mark": "\ufeffapiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n",
    "a break in a plain scalar": "a: one\x85two\nb: 2\n",
    "no final newline": "a:\n  b: [1, 2]\n  c: d",
    # libyaml ends a block collection at the end of such a text on a line of its own, past the last
    "a list without a final newline": "- a: 1\n- b\n- c: [1, 2]\n  d: e",
    "an empty item at the end": "a:\n- x\n-",
    "flow style without a final newline": "{apiVersion: v1, kind: Pod, metadata: {name: x}}",
    "a bom and crlf without a final newline": "\ufeffa: 1\r\nb:\r\n- c\r\n- d: e",
    "a scalar document": "just text\n---\n- a\n- b\n",
    "deep": "a: " + "[" * 60 + "1" + "]" * 60 + "\n",
}
