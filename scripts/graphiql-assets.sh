#!/usr/bin/env bash
# Re-fetches the GraphiQL page's assets (shared/graphql/assets/graphiql/, inlined into the page at
# `/` by shared/graphql/src/graphiql.rs) from the npm registry with `npm pack`, at the versions
# pinned in assets.lock, and checks every tarball and every copied file against its SHA-256 there.
# Run by hand when upgrading (edit the lock, run with --update, review the diff); never at build or
# test time (the committed files are what ships; a unit test checks them against the lock too).
#
# Usage: scripts/graphiql-assets.sh            fetch, verify, copy into the assets directory
#        scripts/graphiql-assets.sh --check    verify the committed files only (no network)
#        scripts/graphiql-assets.sh --update   fetch, copy, and rewrite the lock's sums
#
# Lock lines: <package> <version> <tarball sha256> <path in tarball> <committed file> <file sha256>
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$repo_root/shared/graphql/assets/graphiql"
lock="$dir/assets.lock"
mode="${1:-fetch}"
case "$mode" in fetch | --check | --update) ;; *)
    echo "usage: $0 [--check|--update]" >&2
    exit 2
    ;;
esac

sum() { sha256sum "$1" | cut -d' ' -f1; }
fail=0
if [[ "$mode" == --check ]]; then
    while read -r pkg version _ _ file want; do
        [[ -z "$pkg" || "$pkg" == \#* ]] && continue
        got="$(sum "$dir/$file")"
        if [[ "$got" != "$want" ]]; then
            echo "graphiql-assets.sh: $file ($pkg@$version) has sha256 $got, the lock says $want" >&2
            fail=1
        fi
    done <"$lock"
    [[ $fail == 0 ]] && echo "graphiql-assets.sh: every committed asset matches $(basename "$lock")"
    exit $fail
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
new_lock="$work/assets.lock"
grep '^#' "$lock" >"$new_lock" || true
while read -r pkg version tgz_want member file want; do
    [[ -z "$pkg" || "$pkg" == \#* ]] && continue
    tgz="$work/$pkg-$version.tgz"
    if [[ ! -f "$tgz" ]]; then
        # npm pack checks the registry's sha512 integrity; the lock pins the tarball on top of it.
        packed="$(cd "$work" && npm pack --silent "$pkg@$version" | tail -n 1)"
        [[ -f "$work/$packed" ]] || { echo "graphiql-assets.sh: npm pack $pkg@$version made no tarball" >&2; exit 1; }
        [[ "$work/$packed" == "$tgz" ]] || mv "$work/$packed" "$tgz"
        mkdir -p "$work/$pkg-$version"
        tar -xzf "$tgz" -C "$work/$pkg-$version"
    fi
    tgz_got="$(sum "$tgz")"
    got="$(sum "$work/$pkg-$version/$member")"
    if [[ "$mode" == --update ]]; then
        tgz_want="$tgz_got" want="$got"
    elif [[ "$tgz_got" != "$tgz_want" || "$got" != "$want" ]]; then
        echo "graphiql-assets.sh: $pkg@$version does not match the lock (tarball $tgz_got, $member $got)" >&2
        fail=1
        continue
    fi
    cp "$work/$pkg-$version/$member" "$dir/$file"
    echo "$pkg $version $tgz_want $member $file $want" >>"$new_lock"
done <"$lock"
[[ $fail == 0 ]] || exit 1
[[ "$mode" == --update ]] && cp "$new_lock" "$lock"
echo "graphiql-assets.sh: $(grep -vc '^#' "$lock") files copied into $dir and verified"
