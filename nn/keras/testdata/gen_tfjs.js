// gen_tfjs.js writes the TensorFlow.js fixtures of Functional graphs
// (see README.md) with TensorFlow.js's own serialisation:
//
//   node gen_tfjs.js [DIR]
//
// with @tensorflow/tfjs on NODE_PATH (or in ./node_modules). DIR is where
// the files go, this script's directory by default:
//
//   tfjs_resblock_model.json (+ tfjs_resblock.weights.bin)
//       a residual block with a projection shortcut and Add, saved as a
//       layers model (model.save: "modelTopology" and "weightsManifest",
//       as tf.io's file and http handlers write model.json);
//   tfjs_branches.json
//       branches joined by Concatenate on channels, rows and columns, and
//       dense branches merged by Average, Maximum, Minimum and Multiply,
//       as model.toJSON(null, false) returns it (TensorFlow.js has no
//       Subtract layer);
//   tfjs_depthwise_branches.json
//       a depthwise-separable convolution (DepthwiseConv2D without bias,
//       BatchNormalization, relu, 1×1 conv) beside a 1×1 branch, joined
//       by Concatenate, on 28×28×1, as model.toJSON returns it;
//   tfjs_resnet20.json
//       ResNet-20 (He et al. 2016's CIFAR network, 3 stages of 3 basic
//       blocks, 16/32/64 filters, convolutions without bias before
//       BatchNormalization, projection shortcuts, global average pooling)
//       on 32×32×3, as model.toJSON returns it.
//
// The weights are TensorFlow.js's random initial ones: the tests read
// the topology (and the weight file's names and shapes), not the values.
'use strict';

const fs = require('fs');
const path = require('path');
let tf;
try {
  tf = require('@tensorflow/tfjs');
} catch (e) {
  tf = require('/tmp/tfjs/node_modules/@tensorflow/tfjs');
}

const dir = process.argv[2] || __dirname;

function resblock() {
  const x = tf.input({shape: [8, 8, 3], name: 'image'});
  let y = tf.layers.conv2d({filters: 8, kernelSize: 3, padding: 'same', name: 'conv_a'}).apply(x);
  y = tf.layers.batchNormalization({name: 'bn_a'}).apply(y);
  y = tf.layers.activation({activation: 'relu', name: 'relu_a'}).apply(y);
  y = tf.layers.conv2d({filters: 8, kernelSize: 3, padding: 'same', name: 'conv_b'}).apply(y);
  y = tf.layers.batchNormalization({name: 'bn_b'}).apply(y);
  const s = tf.layers.conv2d({filters: 8, kernelSize: 1, name: 'shortcut'}).apply(x);
  let z = tf.layers.add({name: 'add'}).apply([y, s]);
  z = tf.layers.activation({activation: 'relu', name: 'relu_out'}).apply(z);
  z = tf.layers.flatten({name: 'flatten'}).apply(z);
  z = tf.layers.dense({units: 10, activation: 'softmax', name: 'scores'}).apply(z);
  return tf.model({inputs: x, outputs: z, name: 'resblock'});
}

function branches() {
  const x = tf.input({shape: [8, 8, 3], name: 'image'});
  const b1 = tf.layers.conv2d({filters: 4, kernelSize: 1, activation: 'relu', name: 'branch_1x1'}).apply(x);
  const b2 = tf.layers.conv2d({filters: 4, kernelSize: 3, padding: 'same', activation: 'relu', name: 'branch_3x3'}).apply(x);
  let b3 = tf.layers.maxPooling2d({poolSize: 3, strides: 1, padding: 'same', name: 'branch_pool'}).apply(x);
  b3 = tf.layers.conv2d({filters: 4, kernelSize: 1, activation: 'relu', name: 'branch_pool_1x1'}).apply(b3);
  const cat = tf.layers.concatenate({axis: -1, name: 'channels'}).apply([b1, b2, b3]); // 8×8×12
  const mp = tf.layers.maxPooling2d({poolSize: 2, name: 'max_pool'}).apply(cat); // 4×4×12
  const ap = tf.layers.averagePooling2d({poolSize: 2, name: 'avg_pool'}).apply(cat); // 4×4×12
  const rows = tf.layers.concatenate({axis: 1, name: 'rows'}).apply([mp, ap]); // 8×4×12
  const cols = tf.layers.concatenate({axis: 2, name: 'cols'}).apply([rows, rows]); // 8×8×12
  const f = tf.layers.flatten({name: 'flatten'}).apply(cols);
  const d1 = tf.layers.dense({units: 16, activation: 'relu', name: 'dense_relu'}).apply(f);
  const d2 = tf.layers.dense({units: 16, activation: 'tanh', name: 'dense_tanh'}).apply(f);
  const avg = tf.layers.average({name: 'average'}).apply([d1, d2]);
  const mx = tf.layers.maximum({name: 'maximum'}).apply([d1, d2, avg]);
  const mn = tf.layers.minimum({name: 'minimum'}).apply([d1, d2]);
  const mul = tf.layers.multiply({name: 'multiply'}).apply([mx, mn]);
  const both = tf.layers.concatenate({name: 'features'}).apply([mul, avg]); // 32
  const out = tf.layers.dense({units: 10, activation: 'softmax', name: 'scores'}).apply(both);
  return tf.model({inputs: x, outputs: out, name: 'branches'});
}

function depthwiseBranches() {
  const x = tf.input({shape: [28, 28, 1], name: 'image'});
  // The initializers of gen_keras.py's model (HeNormal convolutions,
  // GlorotUniform depthwise and dense kernels), so that the forms are one
  // architecture.
  const he = 'heNormal', glorot = 'glorotUniform';
  const stem = tf.layers.conv2d({filters: 8, kernelSize: 3, strides: 2, padding: 'same', activation: 'relu', kernelInitializer: he, name: 'stem'}).apply(x);
  let a = tf.layers.depthwiseConv2d({kernelSize: 3, padding: 'same', useBias: false, depthwiseInitializer: glorot, name: 'depthwise'}).apply(stem);
  a = tf.layers.batchNormalization({name: 'depthwise_bn'}).apply(a);
  a = tf.layers.activation({activation: 'relu', name: 'depthwise_relu'}).apply(a);
  a = tf.layers.conv2d({filters: 8, kernelSize: 1, activation: 'relu', kernelInitializer: he, name: 'pointwise'}).apply(a);
  const b = tf.layers.conv2d({filters: 8, kernelSize: 1, activation: 'relu', kernelInitializer: he, name: 'branch_1x1'}).apply(stem);
  let y = tf.layers.concatenate({name: 'branches'}).apply([a, b]);
  y = tf.layers.maxPooling2d({poolSize: 2, name: 'pool'}).apply(y);
  y = tf.layers.flatten({name: 'flatten'}).apply(y);
  y = tf.layers.dense({units: 10, activation: 'softmax', kernelInitializer: glorot, name: 'scores'}).apply(y);
  return tf.model({inputs: x, outputs: y, name: 'depthwise_branches'});
}

function resnet20() {
  const x = tf.input({shape: [32, 32, 3], name: 'image'});
  const conv = (filters, k, strides, name) =>
    tf.layers.conv2d({filters, kernelSize: k, strides, padding: 'same', useBias: false, kernelInitializer: 'heNormal', name});
  const bn = name => tf.layers.batchNormalization({momentum: 0.99, epsilon: 1e-3, name});
  const relu = name => tf.layers.activation({activation: 'relu', name});
  let y = conv(16, 3, 1, 'conv').apply(x);
  y = bn('bn').apply(y);
  y = relu('relu').apply(y);
  let c = 16;
  [16, 32, 64].forEach((width, stage) => {
    for (let i = 0; i < 3; i++) {
      const p = `stage${stage + 1}_block${i + 1}_`;
      const stride = stage > 0 && i === 0 ? 2 : 1;
      let b = conv(width, 3, stride, p + 'conv1').apply(y);
      b = bn(p + 'bn1').apply(b);
      b = relu(p + 'relu1').apply(b);
      b = conv(width, 3, 1, p + 'conv2').apply(b);
      b = bn(p + 'bn2').apply(b);
      let s = y;
      if (stride !== 1 || c !== width) {
        s = conv(width, 1, stride, p + 'proj').apply(y);
        s = bn(p + 'proj_bn').apply(s);
      }
      y = tf.layers.add({name: p + 'add'}).apply([b, s]);
      y = relu(p + 'out').apply(y);
      c = width;
    }
  });
  y = tf.layers.globalAveragePooling2d({name: 'pool'}).apply(y);
  // Keras's default, as gen_keras.py's model has it.
  y = tf.layers.dense({units: 10, activation: 'softmax', kernelInitializer: 'glorotUniform', name: 'scores'}).apply(y);
  return tf.model({inputs: x, outputs: y, name: 'resnet20'});
}

// writeJSON writes v indented, or on one line (as toJSON's string) when
// compact.
function writeJSON(name, v, compact) {
  fs.writeFileSync(path.join(dir, name), JSON.stringify(v, null, compact ? undefined : 2) + '\n');
  console.log('wrote', name);
}

// saveLayersModel writes model.json as tf.io's handlers do
// (tfjs-core io_utils getModelJSONForModelArtifacts) and its one shard.
async function saveLayersModel(model, base) {
  const weights = base + '.weights.bin';
  await model.save(tf.io.withSaveHandler(async art => {
    const json = {
      modelTopology: art.modelTopology,
      format: art.format,
      generatedBy: art.generatedBy,
      convertedBy: art.convertedBy,
      weightsManifest: [{paths: ['./' + weights], weights: art.weightSpecs}],
    };
    if (art.trainingConfig != null) json.trainingConfig = art.trainingConfig;
    writeJSON(base + '_model.json', json);
    fs.writeFileSync(path.join(dir, weights), Buffer.from(art.weightData));
    console.log('wrote', weights);
    return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
  }));
}

(async () => {
  await saveLayersModel(resblock(), 'tfjs_resblock');
  writeJSON('tfjs_branches.json', branches().toJSON(null, false));
  writeJSON('tfjs_depthwise_branches.json', depthwiseBranches().toJSON(null, false));
  const r = resnet20();
  console.log('resnet20 parameters', r.countParams());
  writeJSON('tfjs_resnet20.json', r.toJSON(null, false), true);
})();
