# On the GPU machine, sourced from the repository root: install what scripts/device_wheels.sh
# carried into /tmp/site (the image has cuda-bindings, cuBLAS, torch and jax) and put hlocc's
# sources, the benchmarks and that folder on the path.
mkdir -p /tmp/site
tar xJf .whl/llvmlite.tar.xz -C /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:$PWD/benchmarks:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
# hlocc's entry points (the torch_dynamo_backends one: torch.compile(backend="hlocc")), which an
# install would have written: a dist-info of its own on the path
info=/tmp/site/hlocc_device-0.dist-info
mkdir -p $info
printf 'Metadata-Version: 2.1\nName: hlocc-device\nVersion: 0\n' > $info/METADATA
sed -n '/^\[project.entry-points\./,/^$/p' pyproject.toml | sed -e 's/^\[project.entry-points\./[/' -e 's/"//g' > $info/entry_points.txt
