#!/bin/sh
# curl stand-in on busybox wget, for the few forms the e2e suite execs:
# curl [-g] [-q] [-s] [-i] [-o FILE] [-w %{http_code}] [--max-time N] [--connect-timeout N] URL
out=- fmt= include= timeout= url=
while [ $# -gt 0 ]; do
	case $1 in
	-g | -q | -s | -L) ;;
	-i) include=1 ;;
	-o) out=$2; shift ;;
	-w) fmt=$2; shift ;;
	--max-time | -m) timeout=$2; shift ;;
	--connect-timeout) [ -n "$timeout" ] || timeout=$2; shift ;;
	-*) ;;
	*) url=$1 ;;
	esac
	shift
done
[ -n "$url" ] || { echo "curl (stand-in): no URL" >&2; exit 2; }
hdr=$(mktemp) body=$(mktemp)
# (not wget -T: busybox 1.35's wget crashes with it on an HTTP error)
${timeout:+timeout "$timeout"} wget -S -q -O "$body" "$url" 2>"$hdr"
rc=$?
code=$(sed -n 's/^ *HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' "$hdr" | tail -1)
if [ -z "$code" ]; then rm -f "$hdr" "$body"; exit 7; fi
{
	if [ -n "$include" ]; then sed 's/^  //' "$hdr"; echo; fi
	cat "$body"
} >"$( [ "$out" = - ] && echo /dev/stdout || echo "$out")"
if [ "$fmt" = '%{http_code}' ]; then printf '%s' "$code"; fi
rm -f "$hdr" "$body"
exit 0
