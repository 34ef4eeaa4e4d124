# bash completion for spillway(1). Installed to
# <prefix>/share/bash-completion/completions/spillway; to try it from the
# source tree: source tools/completion/spillway.bash
# The option lists follow `spillway COMMAND --help`; tests/tools/completion_test.sh
# checks them against the CLI.

# Profile names: the keys under `profiles:` in the config file FILE, one per
# line (two-space or deeper indented keys directly below the top-level key).
_spillway_profiles() {
  local file=$1
  [ -r "$file" ] || return 0
  awk '
    /^[^[:space:]#]/ { inprof = ($0 ~ /^profiles:[[:space:]]*(#.*)?$/); indent = 0; next }
    inprof && /^[[:space:]]+[^[:space:]#-][^:]*:/ {
      match($0, /^[[:space:]]+/)
      if (indent == 0) indent = RLENGTH
      if (RLENGTH != indent) next
      key = substr($0, RLENGTH + 1); sub(/:.*/, "", key)
      gsub(/^["\x27]|["\x27]$/, "", key)
      print key
    }' "$file" 2>/dev/null
}

_spillway() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null 2>&1; then
    _init_completion || return
  else
    COMPREPLY=()
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
  fi

  local commands="bench demo help info inspect stress validate version"
  local cmd="" i
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      -*) ;;
      *) cmd=${words[i]}; break ;;
    esac
  done

  if [ -z "$cmd" ]; then
    COMPREPLY=($(compgen -W "$commands -h --help --version" -- "$cur"))
    return 0
  fi

  local opts=""
  case $cmd in
    validate) opts="-h --help --profile --worker --strict --json --create-dirs" ;;
    demo) opts="-h --help -c --config --profile --multiple --read-ahead --object-bytes" ;;
    info) opts="-h --help --profile --json" ;;
    stress) opts="-h --help -c --config --profile -t --threads -n --ops -s --seconds --seed --sizes --keys
                  --faults --verify --no-verify --reopen --json --device" ;;
    inspect) opts="-h --help --json --summary --strict --progress --no-progress" ;;
    bench) opts="-h --help --quick --json --out --dir --machine --sections --reps --python --plots --no-plots" ;;
    version) opts="-h --help" ;;
    help) COMPREPLY=($(compgen -W "${commands/help /}" -- "$cur")); return 0 ;;
    *) return 0 ;;
  esac

  case $prev in
    -c | --config)
      COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return 0 ;;
    --out | --dir)
      COMPREPLY=($(compgen -d -- "$cur")); compopt -o filenames 2>/dev/null; return 0 ;;
    --python)
      COMPREPLY=($(compgen -c -- "$cur")); return 0 ;;
    --profile)
      # The config given earlier on the line: --config/-c FILE, or the
      # positional FILE of validate and info.
      local config="" j
      for ((j = i + 1; j < cword; j++)); do
        case ${words[j]} in
          -c | --config) config=${words[j+1]}; ((j++)) ;;
          --config=*) config=${words[j]#--config=} ;;
          --profile | --worker) ((j++)) ;;
          -*) ;;
          *) [ "$cmd" = validate ] || [ "$cmd" = info ] && config=${words[j]} ;;
        esac
      done
      [ -n "$config" ] && [ "$config" != - ] && config=${config/#\~/$HOME}
      COMPREPLY=($(compgen -W "$(_spillway_profiles "$config")" -- "$cur"))
      return 0 ;;
    --worker | --multiple | --read-ahead | --object-bytes | -t | --threads | -n | --ops | -s | --seconds | \
      --seed | --sizes | --keys | --faults | --machine | --sections | --reps)
      return 0 ;;  # a value of the user's own
  esac

  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return 0
  fi
  case $cmd in
    validate | info) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null ;;
    inspect) COMPREPLY=($(compgen -d -- "$cur")); compopt -o filenames 2>/dev/null ;;
  esac
  return 0
}

complete -F _spillway spillway
