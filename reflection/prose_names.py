"""People's names in ordinary prose, where the words around them say they are one.

"Confirmed with Jane Doe", "a fix from Priya Natarajan", "reported by Tom Baker", "thanks
Jane", "Hi Jane,", a sign-off ("Regards,\\nJane Doe"): a name stands after a word that takes
a person. Capitalised words that are not names stand there too ("with Python", "from
Visual Studio", "by Monday", "thanks GitHub Actions"), so a name needs two capitalised
words after with/from/by (one after a greeting or a thank-you), and none of them may be
a word of `_NOT_NAMES`: weekdays, months, languages, tools, companies and the words of
product and team names. What is left is measured in bench/redaction_bench.py.
"""

from __future__ import annotations

__all__ = ["NOT_NAMES", "name_words"]

NOT_NAMES = frozenset(
    """
    monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday
    january february march april may june july august september october november december
    spring summer autumn fall winter christmas easter
    python java javascript typescript rust go golang ruby perl php kotlin swift scala haskell
    elixir erlang clojure julia lua dart bash shell zsh powershell fish sql nosql html css
    django flask fastapi starlette pydantic pytest numpy pandas scipy torch pytorch tensorflow
    keras jax react vue angular svelte next nuxt node deno bun express rails laravel spring
    boot hibernate maven gradle npm yarn pnpm pip poetry conda cargo docker compose podman
    kubernetes helm terraform ansible puppet chef vagrant nginx apache tomcat redis postgres
    postgresql mysql mariadb sqlite mongo mongodb cassandra kafka rabbit rabbitmq elastic
    elasticsearch kibana grafana prometheus jenkins travis circle gitlab github bitbucket
    git mercurial jira confluence slack teams zoom discord notion linear figma sentry datadog
    linux ubuntu debian fedora alpine centos windows mac macos ios android unix freebsd
    google microsoft amazon apple meta facebook netflix oracle ibm intel nvidia amd openai
    anthropic mozilla firefox chrome chromium safari edge opera stack overflow reddit
    aws azure gcp cloud heroku vercel netlify cloudflare digital ocean
    visual studio code vim emacs neovim intellij pycharm eclipse xcode sublime atom
    actions action pages packages registry hub store app apps api apis sdk cli gui ui ux
    software foundation license licence apache mit gnu bsd public general lesser
    service services server servers client clients engine platform framework library
    module modules package plugin plugins extension extensions tool tools toolkit kit
    system systems network networks data database databases cache storage queue worker
    manager management team teams group department office board committee council
    release releases version versions build builds test tests testing check checks suite
    pull push request requests merge branch branches commit commits tag tags issue issues
    error errors exception exceptions warning warnings bug bugs fix fixes patch patches
    default defaults config configuration settings options option mode modes level
    null none true false nil undefined new old first last next previous final main
    north south east west central united states kingdom europe european america american
    english french german spanish italian chinese japanese dutch indian british
    university college school institute academy center centre lab labs research
    inc ltd llc corp co company corporation group holdings partners
    mr mrs ms dr prof sir madam team everyone all folks guys world there again
    create table select insert update delete drop alter index view add remove
    the a an and or of for in on at to by with from via as is are was be this that these
    those it its our your their my his her we you they i
    let encrypt hat red blue green black white open source free
    """.split()
)  # fmt: skip


def name_words(words: list[str], *, least: int) -> int:
    """How many of `words` (capitalised words in a row) make a person's name: 0 when the
    first `least` are not all name-like; words from the first that is not one are dropped."""
    count = 0
    for word in words:
        if word.casefold().strip("'’") in NOT_NAMES or word.isupper():
            break
        count += 1
    return count if count >= least else 0
