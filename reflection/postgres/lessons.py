"""Lessons in a team's PostgreSQL: derived from outcome records, ranked across projects.

`add_lessons` / `drop_lessons` keep `goldenloop_lessons` in step with the live outcome
records; the store calls them in the record's own transaction. `PostgresLessonIndex` is
the `LessonRanker` on those rows, scoring exactly as the SQLite cache beside the JSONL
files does (reflection/lesson_index.py): candidates by text and by key, then
`score_lesson` and `best_lessons` in Python, so a lesson ranks alike on either.

- Text: the query's words (`query_terms`), and only the rarest kept within a budget of
  rows, as the SQLite index keeps them for FTS5: a word found in most lessons would
  cost a scan and says little. How many lessons hold a word comes from the planner's
  statistics of the `tsvector` column (`LexemeStats`; counted exactly while there are
  few lessons), never from counting rows per query. The candidates are the best ~200
  by the summed bm25 weight (idf) of the words they hold, found through the GIN index
  on the generated `tsvector`; similarity is that weight relative to the best
  candidate's, as bm25 is made relative there.
- Keys: the newest 50 lessons per file, file name, label, error signature and task type
  of the query (`query_keys`), from the B-tree of `goldenloop_lesson_keys`.
- Meaning: with an embedder, the cosine of pgvector's `<=>` replaces the text weight.
  Lessons without a vector of the embedder's size are embedded first (`_embed_missing`),
  and each size has its own HNSW index, so the search stays an index scan.

A lesson of another project is returned with `Lesson.project` naming it; the asking task
is excluded only in the asking project (another project's T-1 is another task). Uses are
recorded per showing project; a lesson's usefulness sums them over every project, while
`proven` (the rules a project promotes) counts only the project's own attempts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from reflection.lesson_index import (
    EMBED_BATCH,
    FTS_CANDIDATES,
    KEY_CANDIDATES,
    POSTING_BUDGET,
    PROBE_CAP,
    lesson_keys,
    query_keys,
    query_terms,
)
from reflection.lessons import Lesson, LessonQuery, RankedLesson, best_lessons, score_lesson
from reflection.postgres.connection import (
    SCHEMA_LOCK,
    PostgresUnavailable,
    apply_schema,
    first_line,
    psycopg_module,
    safe_url,
    server_gone,
)
from reflection.postgres.schema import VECTOR_COMPONENT, VECTOR_MIGRATIONS, memory_database, vector_index_statements

if TYPE_CHECKING:
    import psycopg

    from reflection.lesson_index import Embedder

log = logging.getLogger("goldenloop.lessons")

LESSON_SQL = (
    "INSERT INTO goldenloop_lessons (record_seq, project, lesson_id, task_id, lesson, search)"
    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (record_seq) DO NOTHING"
)
KEY_SQL = "INSERT INTO goldenloop_lesson_keys (key, record_seq) VALUES (%s, %s) ON CONFLICT DO NOTHING"
NOT_ASKING = "(l.project, l.task_id) IS DISTINCT FROM (%s, %s)"  # the asking task of the asking project
# Each word of a query as the lexemes the index holds it by (none for a stop word).
STEM_SQL = "SELECT term, tsvector_to_array(to_tsvector('english', term)) FROM unnest(%s::text[]) AS term"
# The lexemes most lessons hold, with the share of lessons holding each, as ANALYZE
# sampled them; the list ends with the smallest and largest share and that of NULLs.
LEXEME_STATS_SQL = (
    "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats"
    " WHERE tablename = 'goldenloop_lessons' AND attname = 'search_tsv' AND schemaname = current_schema()"
)
LESSONS_ESTIMATE_SQL = "SELECT reltuples FROM pg_class WHERE oid = 'goldenloop_lessons'::regclass"
EXACT_LEXEMES_SQL = "SELECT word, ndoc FROM ts_stat('SELECT search_tsv FROM goldenloop_lessons')"
EXACT_UP_TO = PROBE_CAP  # lessons up to which every word's count is read exactly (one pass over them)
# The newest lessons of each key, the asking task's left out.
KEY_CANDIDATES_SQL = (
    "SELECT DISTINCT found.record_seq FROM unnest(%s::text[]) AS k(key), LATERAL ("
    " SELECT lk.record_seq FROM goldenloop_lesson_keys lk JOIN goldenloop_lessons l ON l.record_seq = lk.record_seq"
    f" WHERE lk.key = k.key AND {NOT_ASKING} ORDER BY lk.record_seq DESC LIMIT %s) AS found"
)
LOAD_SQL = "SELECT record_seq, project, lesson FROM goldenloop_lessons WHERE record_seq = ANY(%s)"
# One lesson by id: the asking project's own first, else the oldest of another project.
GET_SQL = (
    "SELECT project, lesson FROM goldenloop_lessons WHERE lesson_id = %s ORDER BY project <> %s, record_seq LIMIT 1"
)
USES_OF_SQL = (
    "SELECT lesson_project, lesson_id, sum(shown)::int, sum(helped)::int FROM goldenloop_lesson_counts"
    " WHERE (lesson_project, lesson_id) IN (SELECT * FROM unnest(%s::text[], %s::text[])) GROUP BY 1, 2"
)
# The project of each lesson id: the asking project's own lesson first, else the oldest.
OWNERS_SQL = (
    "SELECT DISTINCT ON (lesson_id) lesson_id, project FROM goldenloop_lessons WHERE lesson_id = ANY(%s)"
    " ORDER BY lesson_id, project <> %s, record_seq"
)
# Each showing once (a retried insert adds nothing), and the counters of what was new.
USES_SQL = (
    "WITH new AS (INSERT INTO goldenloop_lesson_uses (project, lesson_project, lesson_id, task_id, attempt, passed, at)"
    " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::int[], %s::bool[], %s::timestamptz[])"
    " ON CONFLICT DO NOTHING RETURNING lesson_project, lesson_id, project, passed),"
    " counted AS (INSERT INTO goldenloop_lesson_counts AS c (lesson_project, lesson_id, project, shown, helped)"
    " SELECT lesson_project, lesson_id, project, count(*), count(*) FILTER (WHERE passed) FROM new"
    " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    " ON CONFLICT (lesson_project, lesson_id, project)"
    " DO UPDATE SET shown = c.shown + excluded.shown, helped = c.helped + excluded.helped RETURNING 1)"
    " SELECT count(*) FROM new"
)
PROVEN_SQL = (
    "SELECT l.project, l.lesson, c.shown, c.helped FROM goldenloop_lesson_counts c"
    " JOIN goldenloop_lessons l ON l.lesson_id = c.lesson_id AND l.project = c.lesson_project"
    " WHERE c.project = %s AND c.helped >= %s ORDER BY l.record_seq"
)
RAW_USES_SQL = (
    "SELECT lesson_id, task_id, attempt, passed, at FROM goldenloop_lesson_uses WHERE project = %s ORDER BY seq"
)
USES_PAGE = 1000
OWNER_MEMORY = 10_000  # lesson ids remembered from ranking, to credit the lesson that was shown
STATS_FOR_S = 300.0  # how long the lexeme statistics are trusted before they are read again


# -- lessons derived from records ---------------------------------------------------


def add_lessons(conn: psycopg.Connection, project: str, records: Iterable[tuple[int, dict[str, Any]]]) -> None:
    """The lessons of these (row seq, body) records and their keys; records that teach
    nothing are passed over. Called inside the records' own transaction."""
    lessons, keys = [], []
    for seq, body in records:
        lesson = Lesson.from_record(body)
        if lesson is None:
            continue
        lessons.append((seq, project, lesson.id, lesson.task_id, lesson.to_json().decode(), lesson.search_text))
        keys.extend((key, seq) for key in sorted(lesson_keys(lesson)))
    if lessons:
        with conn.cursor() as cur:
            cur.executemany(LESSON_SQL, lessons)
            cur.executemany(KEY_SQL, keys)


def drop_lessons(conn: psycopg.Connection, seqs: list[int]) -> None:
    """Forget the lessons of records that left for the archive (their keys and vectors go with them)."""
    if seqs:
        conn.execute("DELETE FROM goldenloop_lessons WHERE record_seq = ANY(%s)", (seqs,))


# -- ranking ----------------------------------------------------------------------------


class PostgresLessonIndex:
    """The `LessonRanker` of one project on a team's database; see the module docstring."""

    def __init__(self, url: str, *, project: str, embedder: Embedder | None = None) -> None:
        self.project = project
        self.embedder = embedder
        self.location = f"{safe_url(url)} (project {project})"
        self._db = memory_database(url)
        self._owners: dict[str, str] = {}  # lesson id -> its project, as last ranked
        self._indexed_dims: set[int] = set()
        self._stats: LexemeStats | None = None
        self._mutex = threading.Lock()
        if embedder is not None:
            self._setup_vectors(url)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> PostgresLessonIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _setup_vectors(self, url: str) -> None:
        """pgvector's table, or one sentence on why the database cannot rank by meaning."""
        try:
            self._db.run(lambda conn: apply_schema(conn, VECTOR_COMPONENT, VECTOR_MIGRATIONS))
        except psycopg_module().Error as exc:
            if server_gone(exc):
                raise
            raise PostgresUnavailable(
                f"ranking lessons by meaning (memory.embeddingModel) needs the pgvector extension in "
                f"{safe_url(url)}, which cannot be set up: {first_line(exc)} "
                "(a database administrator can run CREATE EXTENSION vector)"
            ) from None

    # -- the protocol ---------------------------------------------------------------

    def rank(self, query: LessonQuery, limit: int = 3) -> list[RankedLesson]:
        similarity = self._cosine_candidates(query) if self.embedder is not None else self._text_candidates(query)
        seqs = set(similarity) | self._key_candidates(query)
        if not seqs:
            return []
        lessons = self._load(seqs)
        uses = self._uses_of(list(lessons.values()))
        now = datetime.now(UTC)
        elsewhere = replace(query, exclude_task_id=None)  # another project's task of that id is another task
        ranked = []
        for seq, lesson in lessons.items():
            shown, helped = uses.get((lesson.project or self.project, lesson.id), (0, 0))
            scored = score_lesson(lesson, elsewhere if lesson.project else query, similarity.get(seq, 0.0),
                                  shown=shown, helped=helped, now=now, lexical=self.embedder is None)
            if scored is not None:
                ranked.append(scored)
        chosen = best_lessons(ranked, limit)
        self._remember_owners(chosen)
        return chosen

    def search(self, text: str, limit: int = 10) -> list[RankedLesson]:
        return self.rank(LessonQuery(text=text, by_person=True), limit)

    def record_use(self, lesson_ids: Iterable[str], *, task_id: str, attempt: int, passed: bool) -> None:
        ids = list(dict.fromkeys(lesson_ids))
        if not ids:
            return
        at = datetime.now(UTC)  # fixed before any retry: a retried insert is the same showing

        def write(conn: psycopg.Connection) -> None:
            owners = self._owners_of(conn, ids)
            insert_uses(conn, [(self.project, owners[lid], lid, task_id, attempt, passed, at) for lid in ids])

        self._db.transaction(write)

    def usefulness(self, lesson_id: str) -> tuple[int, int]:
        def read(conn: psycopg.Connection) -> tuple[int, int]:
            owner = self._owners_of(conn, [lesson_id])[lesson_id]
            row = conn.execute(USES_OF_SQL, ([owner], [lesson_id])).fetchone()
            return (row[2], row[3]) if row else (0, 0)

        return self._db.run(read)

    def proven(self, min_helped: int) -> list[tuple[Lesson, int, int]]:
        rows = self._db.run(lambda conn: conn.execute(PROVEN_SQL, (self.project, min_helped)).fetchall())
        return [(self._lesson(project, text), shown, helped) for project, text, shown, helped in rows]

    def has_uses(self) -> bool:
        fact = f"lesson uses of {self.project}"
        if self._db.knows(fact):
            return True  # uses are never deleted
        sql = "SELECT EXISTS (SELECT 1 FROM goldenloop_lesson_counts WHERE project = %s)"
        found = self._db.run(lambda conn: conn.execute(sql, (self.project,)).fetchone()[0])
        if found:
            self._db.remember(fact)
        return found

    # -- candidates -----------------------------------------------------------------

    def _text_candidates(self, query: LessonQuery) -> dict[int, float]:
        """Candidate lessons by shared words, each with a similarity in [0, 1]."""
        terms = query_terms(query.text)
        if not terms:
            return {}

        def search(conn: psycopg.Connection) -> list[tuple[int, float]]:
            return text_matches(conn, terms, (self.project, query.exclude_task_id), self._lexeme_stats(conn))

        rows = self._db.run(search)
        best = max((score for _, score in rows), default=0.0)
        return {seq: score / best for seq, score in rows} if best > 0 else {}

    def _lexeme_stats(self, conn: psycopg.Connection) -> LexemeStats:
        """How many lessons hold which words, read again every STATS_FOR_S seconds."""
        with self._mutex:
            stats = self._stats
        if stats is None or time.monotonic() - stats.read_at > STATS_FOR_S:
            stats = LexemeStats.read(conn)
            with self._mutex:
                self._stats = stats
        return stats

    def _key_candidates(self, query: LessonQuery) -> set[int]:
        keys = sorted(query_keys(query))
        if not keys:
            return set()
        params = (keys, self.project, query.exclude_task_id, KEY_CANDIDATES)
        return {seq for (seq,) in self._db.run(lambda conn: conn.execute(KEY_CANDIDATES_SQL, params).fetchall())}

    def _cosine_candidates(self, query: LessonQuery) -> dict[int, float]:
        """Candidate lessons by meaning: the nearest ~200 by cosine, positive ones only."""
        assert self.embedder is not None
        if not query.text.strip():
            return {}
        wanted = self.embedder([query.text])[0]
        dims = len(wanted)
        self._ensure_vector_indexes(dims)
        self._embed_missing(dims)
        sql, params = nearest_vectors_query(dims, vector_literal(wanted), (self.project, query.exclude_task_id))

        def nearest(conn: psycopg.Connection) -> list[tuple[int, float]]:
            # HNSW hands out ef_search rows at most: as many as the candidates wanted.
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(FTS_CANDIDATES),))
            return conn.execute(sql, params).fetchall()

        rows = self._db.transaction(nearest)
        return {seq: cosine for seq, cosine in rows if cosine is not None and cosine > 0}

    def _ensure_vector_indexes(self, dims: int) -> None:
        """The HNSW and not-yet-embedded indexes of one embedding size, once per size."""
        if dims in self._indexed_dims:
            return

        def create(conn: psycopg.Connection) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for statement in vector_index_statements(dims):
                conn.execute(statement)  # type: ignore[arg-type]  # our own DDL, an int spliced in

        self._db.transaction(create)
        self._indexed_dims.add(dims)

    def _embed_missing(self, dims: int) -> None:
        """Embed the lessons that have no vector of this size yet, a batch at a time; the
        embedder is called outside any transaction (it may be slow, or remote)."""
        assert self.embedder is not None
        sql = (
            "SELECT record_seq, search FROM goldenloop_lessons"
            f" WHERE NOT (vector_dims @> ARRAY[{int(dims)}]) ORDER BY record_seq LIMIT %s"
        )
        while True:
            batch = self._db.run(lambda conn: conn.execute(sql, (EMBED_BATCH,)).fetchall())
            if not batch:
                return
            vectors = self.embedder([search for _, search in batch])
            rows = [(seq, vector_literal(v)) for (seq, _), v in zip(batch, vectors, strict=True) if len(v) == dims]
            done = [seq for seq, _ in batch]
            self._db.transaction(lambda conn, rows=rows, done=done: store_vectors(conn, dims, rows, done))

    # -- reading lessons and uses ---------------------------------------------------

    def get(self, lesson_id: str) -> Lesson | None:
        """One lesson by id, of this project or another (as `search` lists them)."""
        row = self._db.run(lambda conn: conn.execute(GET_SQL, (lesson_id, self.project)).fetchone())
        return self._lesson(*row) if row else None

    def _load(self, seqs: set[int]) -> dict[int, Lesson]:
        rows = self._db.run(lambda conn: conn.execute(LOAD_SQL, (sorted(seqs),)).fetchall())
        return {seq: self._lesson(project, text) for seq, project, text in rows}

    def _lesson(self, project: str, text: str) -> Lesson:
        """A stored lesson, naming its project when it is not the asking one."""
        lesson = Lesson.from_json(text)
        return replace(lesson, project=project) if project != self.project else lesson

    def _uses_of(self, lessons: list[Lesson]) -> dict[tuple[str, str], tuple[int, int]]:
        owners = [lesson.project or self.project for lesson in lessons]
        params = (owners, [lesson.id for lesson in lessons])
        rows = self._db.run(lambda conn: conn.execute(USES_OF_SQL, params).fetchall())
        return {(owner, lid): (shown, helped) for owner, lid, shown, helped in rows}

    def _remember_owners(self, ranked: list[RankedLesson]) -> None:
        with self._mutex:
            if len(self._owners) > OWNER_MEMORY:
                self._owners.clear()
            self._owners.update({r.lesson.id: r.lesson.project or self.project for r in ranked})

    def _owners_of(self, conn: psycopg.Connection, ids: list[str]) -> dict[str, str]:
        """The project of each lesson id: the one ranking showed, else the asking project's
        own lesson, else any project's; the asking project for an id nobody has."""
        with self._mutex:
            found = {lid: self._owners[lid] for lid in ids if lid in self._owners}
        unknown = [lid for lid in ids if lid not in found]
        if unknown:
            found.update(dict(conn.execute(OWNERS_SQL, (unknown, self.project)).fetchall()))
        return {lid: found.get(lid, self.project) for lid in ids}

    # -- raw uses, for copying a memory (reflection/migrate.py) ----------------------

    def raw_uses(self) -> Iterator[dict[str, Any]]:
        """Every showing this project recorded, oldest first, as `lesson-uses.jsonl` lines."""
        rows = self._db.run(lambda conn: conn.execute(RAW_USES_SQL, (self.project,)).fetchall())
        for lesson_id, task_id, attempt, passed, at in rows:
            yield {"lessonId": lesson_id, "taskId": task_id, "attempt": attempt, "passed": passed, "at": iso_z(at)}

    def add_uses(self, uses: list[tuple[str, str, int, bool, datetime]]) -> int:
        """Record these (lesson id, task id, attempt, passed, at) showings, a transaction
        per page; the ones already there are left alone. How many were new."""
        added = 0
        for start in range(0, len(uses), USES_PAGE):
            page = uses[start : start + USES_PAGE]
            added += self._db.transaction(lambda conn, page=page: self._insert_uses(conn, page))
        return added

    def _insert_uses(self, conn: psycopg.Connection, page: list[tuple[str, str, int, bool, datetime]]) -> int:
        owners = self._owners_of(conn, list(dict.fromkeys(use[0] for use in page)))
        return insert_uses(conn, [(self.project, owners[use[0]], *use) for use in page])


@dataclass(frozen=True)
class LexemeStats:
    """How many lessons hold a word, estimated from the planner's statistics: no query
    has to count rows. A word among the most common lexemes ANALYZE found is held by its
    sampled share of the lessons; any other word by fewer than the smallest such share."""

    lessons: int
    shares: dict[str, float]
    rare: float  # the share below which a lexeme is not listed
    read_at: float

    @classmethod
    def read(cls, conn: psycopg.Connection) -> LexemeStats:
        """The statistics of a big table; exact counts (one pass) for a small or new one."""
        estimate = conn.execute(LESSONS_ESTIMATE_SQL).fetchone()[0]
        if estimate <= EXACT_UP_TO:  # -1: never analysed, a new table
            lessons = max(conn.execute("SELECT count(*) FROM goldenloop_lessons").fetchone()[0], 1)
            if lessons <= EXACT_UP_TO:
                counts = conn.execute(EXACT_LEXEMES_SQL).fetchall()
                return cls(lessons, {lexeme: n / lessons for lexeme, n in counts}, 0.0, time.monotonic())
            estimate = lessons
        row = conn.execute(LEXEME_STATS_SQL).fetchone()
        lexemes, shares = (row[0] or [], row[1] or []) if row else ([], [])
        shares = [float(share) for share in shares]
        return cls(max(int(estimate), 1), dict(zip(lexemes, shares, strict=False)),
                   shares[len(lexemes)] if len(shares) > len(lexemes) else 0.0, time.monotonic())

    def holding(self, lexemes: list[str]) -> int:
        """About how many lessons hold a word stemmed to these lexemes (at least 1)."""
        share = max((self.shares.get(lexeme, self.rare) for lexeme in lexemes), default=0.0)
        return max(1, round(share * self.lessons))


def text_matches(conn: psycopg.Connection, terms: list[str], asking: tuple[str, str | None],
                 stats: LexemeStats) -> list[tuple[int, float]]:
    """(lesson seq, summed idf of the query's words it holds) of up to FTS_CANDIDATES lessons.

    Only the rarest words within POSTING_BUDGET rows are searched. When every word is
    common, the newest lessons holding all of the rarest few (else the rarest one) are
    taken instead, each weighed 1, so the cost stays bounded.
    """
    counts = {term: stats.holding(lexemes) for term, lexemes in conn.execute(STEM_SQL, (terms,)).fetchall()
              if lexemes}
    chosen = selective_terms(counts)
    if chosen:
        lessons = max(stats.lessons, *counts.values())
        weights = {term: bm25_idf(lessons, counts[term]) for term in chosen}
        return conn.execute(*weighted_text_query(weights, asking)).fetchall()
    present = sorted(counts, key=counts.__getitem__)
    for expression in (" & ".join(present[:4]), present[0] if present else ""):
        rows = conn.execute(*newest_text_query(expression, asking)).fetchall() if expression else []
        if rows:
            return rows
    return []


def selective_terms(counts: dict[str, int]) -> list[str]:
    """The rarest words, while their lessons stay within POSTING_BUDGET and none is in more
    than PROBE_CAP lessons (as the SQLite index chooses them)."""
    chosen: list[str] = []
    total = 0
    for term in sorted(counts, key=counts.__getitem__):
        if counts[term] > PROBE_CAP or total + counts[term] > POSTING_BUDGET:
            break
        chosen.append(term)
        total += counts[term]
    return chosen


def weighted_text_query(weights: dict[str, float], asking: tuple[str, str | None]) -> tuple[str, tuple[Any, ...]]:
    """The best FTS_CANDIDATES lessons holding any of the words, by the summed weight of
    the words they hold: a GIN lookup of the OR of the words, then a sort of those rows."""
    score = " + ".join("(l.search_tsv @@ to_tsquery('english', %s))::int * %s" for _ in weights)
    sql = (
        f"SELECT l.record_seq, {score} AS weight FROM goldenloop_lessons l"
        f" WHERE l.search_tsv @@ to_tsquery('english', %s) AND {NOT_ASKING}"
        " ORDER BY weight DESC, l.record_seq DESC LIMIT %s"
    )
    pairs = [value for pair in weights.items() for value in pair]
    return sql, (*pairs, " | ".join(weights), *asking, FTS_CANDIDATES)


def newest_text_query(expression: str, asking: tuple[str, str | None]) -> tuple[str, tuple[Any, ...]]:
    """The newest FTS_CANDIDATES lessons matching a tsquery expression, each weighed 1."""
    sql = (
        "SELECT l.record_seq, 1.0::float8 FROM goldenloop_lessons l"
        f" WHERE l.search_tsv @@ to_tsquery('english', %s) AND {NOT_ASKING}"
        " ORDER BY l.record_seq DESC LIMIT %s"
    )
    return sql, (expression, *asking, FTS_CANDIDATES)


def nearest_vectors_query(dims: int, literal: str, asking: tuple[str, str | None]) -> tuple[str, tuple[Any, ...]]:
    """The FTS_CANDIDATES lessons whose vector of this size is nearest by cosine, and the
    cosine: an HNSW index scan (the expression and `dims = n` match the partial index)."""
    dims = int(dims)
    sql = (
        f"SELECT v.record_seq, 1 - (v.embedding::vector({dims}) <=> %s::vector({dims}))"
        " FROM goldenloop_lesson_vectors v JOIN goldenloop_lessons l ON l.record_seq = v.record_seq"
        f" WHERE v.dims = {dims} AND {NOT_ASKING}"
        f" ORDER BY v.embedding::vector({dims}) <=> %s::vector({dims}) LIMIT %s"
    )
    return sql, (literal, *asking, literal, FTS_CANDIDATES)


def bm25_idf(lessons: int, holding: int) -> float:
    """bm25's weight of a word that `holding` of `lessons` lessons contain: rare words weigh more."""
    return math.log(1 + (lessons - holding + 0.5) / (holding + 0.5))


def insert_uses(conn: psycopg.Connection, rows: list[tuple[str, str, str, str, int, bool, datetime]]) -> int:
    """Insert (project, lesson project, lesson id, task id, attempt, passed, at) showings and
    add the new ones to the counters, in the caller's transaction; how many were new."""
    columns = [list(column) for column in zip(*rows, strict=True)]
    return conn.execute(USES_SQL, columns).fetchone()[0]


def store_vectors(conn: psycopg.Connection, dims: int, rows: list[tuple[int, str]], seqs: list[int]) -> None:
    """Keep the vectors of one size, and mark every lesson of the batch as done for that
    size (one whose vector came back with another size would otherwise be asked forever)."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO goldenloop_lesson_vectors (record_seq, dims, embedding) VALUES (%s, %s, %s::vector)"
            " ON CONFLICT DO NOTHING",
            [(seq, dims, literal) for seq, literal in rows],
        )
    conn.execute(
        "UPDATE goldenloop_lessons SET vector_dims = vector_dims || %s::int"
        " WHERE record_seq = ANY(%s) AND NOT (vector_dims @> ARRAY[%s::int])",
        (dims, seqs, dims),
    )


def vector_literal(values: list[float]) -> str:
    """pgvector's text form of a vector: `[0.1,0.2,...]`."""
    return orjson.dumps([float(v) for v in values]).decode()


def iso_z(moment: datetime) -> str:
    """A timestamp as the JSONL files write it: ISO-8601 in UTC with a trailing Z."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
