# On the GPU machine, sourced from the repository root: install what scripts/device_wheels.sh
# carried into /tmp/site (the image has cuda-bindings, cuBLAS, torch and jax) and put hlocc's
# sources, the benchmarks and that folder on the path.
mkdir -p /tmp/site
tar xJf .whl/llvmlite.tar.xz -C /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:$PWD/benchmarks:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
