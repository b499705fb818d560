#!/usr/bin/env bash
# Regenerate tests/smaug/print_summary/*.txt by running SMAUG's own Python frontend (its
# print_summary) on the builder scripts that wrote the shipped SMAUG files. Upstream code is run
# from local checkouts, never copied into this repository.
#   tools/smaug_print_summary_goldens.sh SMAUG_CHECKOUT EXPERIMENTS_CHECKOUT
# SMAUG_CHECKOUT: harvard-acc/smaug at 8fd68e61; EXPERIMENTS_CHECKOUT: yaoyuannnn/experiments at
# 43574773 (its models/ folder). Needs python3.11 and the package registry (grpcio-tools, numpy).
set -euo pipefail
smaug=$(realpath "$1"); experiments=$(realpath "$2")
out=$(realpath "$(dirname "$0")/../tests/smaug/print_summary")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp -r "$smaug/smaug" "$work/smaug"
python3.11 -m venv "$work/venv"
"$work/venv/bin/pip" -q install grpcio-tools numpy
(cd "$work" && venv/bin/python -m grpc_tools.protoc -I. --python_out=. smaug/core/*.proto)

# golden  builder-folder  script  sed-expression that picks the variant the shipped file is
golden() {
  local name=$1 folder=$2 script=$3 variant=$4
  mkdir -p "$work/run/$name"
  sed -e "$variant" "$experiments/models/$folder/$script" > "$work/run/$name/net.py"
  # print_summary runs before write_graph; a protobuf newer than SMAUG's may fail the write of
  # float32 data afterwards, which does not touch the summary.
  (cd "$work/run/$name" && PYTHONPATH="$work" ../../venv/bin/python net.py > summary.txt || true)
  cp "$work/run/$name/summary.txt" "$out/$name.txt"
}
to_smv='s/_ref", backend="Reference"/_smv", backend="SMV"/; s/np.float32/np.float16/'
to_ref='s/_smv", backend="SMV"/_ref", backend="Reference"/; s/np.float16/np.float32/'
golden minerva_smv minerva minerva_network.py ''
golden lenet5_smv lenet5 lenet5_network.py ''
golden resnet_smv imagenet-resnet resnet_network.py ''
golden cnn_smv cifar10-cnn cnn_network.py "$to_smv"
golden vgg_smv cifar10-vgg vgg_network.py "$to_smv"
golden minerva_ref minerva minerva_network.py "$to_ref"
golden lenet5_ref lenet5 lenet5_network.py "$to_ref"
echo "wrote $(ls "$out"/*.txt | wc -l) goldens to $out"
