# Sourced by the GPU scripts. Makes `import fa2` work from this checkout and, when a folder .whl/ of wheels
# was carried to a machine without a package index, installs them (nbclient, ipykernel, nbval) out of the way.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/fa2-out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site:$PYTHONPATH PATH=/tmp/site/bin:$PATH
  python3 -m ipykernel install --user --name python3 >/dev/null
fi
