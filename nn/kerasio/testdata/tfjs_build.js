// tfjs_build.js OUT_DIR: builds Keras models in TensorFlow.js (pure
// JavaScript, @tensorflow/tfjs), gives every weight (batch
// normalization's moving statistics too) seeded random values, saves
// each as a layers model (OUT_DIR/NAME/model.json and weights.bin) and
// writes, for the same inputs, what model.predict returns:
// OUT_DIR/NAME/inputs.bin and predictions.bin (float32, little-endian),
// and OUT_DIR/NAME/meta.json with their shapes. Run by the Go tests of
// nn/kerasio, which load the models and compare predictions.
const tf = require('@tensorflow/tfjs');
const fs = require('fs');
const path = require('path');

let seed = 12345;
function rand() { // xorshift32, so the fixtures are reproducible
  seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}

function randomize(model) {
  for (const layer of model.layers) {
    const ws = layer.getWeights();
    if (ws.length === 0) continue;
    layer.setWeights(ws.map((w, k) => {
      const n = w.size;
      const v = new Float32Array(n);
      const variance = /moving_variance/.test(layer.weights[k].originalName);
      for (let i = 0; i < n; i++) v[i] = variance ? 0.5 + rand() : (rand() - 0.5);
      return tf.tensor(v, w.shape);
    }));
  }
}

function cnn() {
  const m = tf.sequential();
  m.add(tf.layers.conv2d({inputShape: [9, 8, 3], filters: 4, kernelSize: 3, padding: 'same', activation: 'relu'}));
  m.add(tf.layers.batchNormalization());
  m.add(tf.layers.maxPooling2d({poolSize: 2, padding: 'same'}));
  m.add(tf.layers.conv2d({filters: 5, kernelSize: 3, strides: 2, padding: 'same'}));
  m.add(tf.layers.averagePooling2d({poolSize: 2, strides: 1, padding: 'same'}));
  m.add(tf.layers.activation({activation: 'tanh'}));
  m.add(tf.layers.flatten());
  m.add(tf.layers.dense({units: 12, activation: 'relu'}));
  m.add(tf.layers.dropout({rate: 0.25}));
  m.add(tf.layers.reshape({targetShape: [2, 2, 3]}));
  m.add(tf.layers.conv2d({filters: 2, kernelSize: 1}));
  m.add(tf.layers.flatten());
  m.add(tf.layers.dense({units: 3, activation: 'softmax'}));
  return m;
}

function residual() {
  const input = tf.input({shape: [6, 6, 2]});
  let x = tf.layers.conv2d({filters: 2, kernelSize: 3, padding: 'same'}).apply(input);
  x = tf.layers.batchNormalization({momentum: 0.9, epsilon: 1e-5}).apply(x);
  x = tf.layers.activation({activation: 'relu'}).apply(x);
  x = tf.layers.add().apply([x, input]);
  x = tf.layers.flatten().apply(x);
  x = tf.layers.dense({units: 4, activation: 'softmax'}).apply(x);
  return tf.model({inputs: input, outputs: x});
}

function mlp() {
  const m = tf.sequential();
  m.add(tf.layers.dense({inputShape: [7], units: 5, activation: 'sigmoid'}));
  m.add(tf.layers.dense({units: 1, activation: 'sigmoid'}));
  return m;
}

// mobile: the image layers of Keras's starting models.
function mobile() {
  const m = tf.sequential();
  m.add(tf.layers.rescaling({inputShape: [7, 6, 3], scale: 1 / 255, offset: -0.5}));
  m.add(tf.layers.zeroPadding2d({padding: [[1, 2], [0, 1]]}));
  m.add(tf.layers.conv2d({filters: 4, kernelSize: [3, 2], strides: 2, padding: 'same', useBias: false}));
  m.add(tf.layers.conv2d({filters: 4, kernelSize: 2, dilationRate: [2, 1], padding: 'same'}));
  m.add(tf.layers.batchNormalization());
  m.add(tf.layers.depthwiseConv2d({kernelSize: 3, depthMultiplier: 2, padding: 'same', activation: 'relu'}));
  m.add(tf.layers.separableConv2d({filters: 5, kernelSize: 2, depthMultiplier: 1}));
  m.add(tf.layers.upSampling2d({size: [2, 3]}));
  m.add(tf.layers.cropping2D({cropping: [[1, 0], [2, 1]]}));
  m.add(tf.layers.globalMaxPooling2d({}));
  m.add(tf.layers.dense({units: 3, activation: 'softmax'}));
  return m;
}

// merges: the merge layers, broadcasting a channel gate as
// squeeze-and-excitation blocks do, and Concatenate of channels, rows and
// a flattened image with a Dense's output.
function merges() {
  const input = tf.input({shape: [4, 3, 2]});
  const c0 = tf.layers.conv2d({filters: 2, kernelSize: 1}).apply(input);
  const c1 = tf.layers.conv2d({filters: 2, kernelSize: 3, padding: 'same'}).apply(input);
  const mul = tf.layers.multiply().apply([c0, c1, input]);
  const avg = tf.layers.average().apply([mul, input, c0]);
  const mx = tf.layers.maximum().apply([avg, c0]);
  const mn = tf.layers.minimum().apply([mx, c1, input]);
  const cat = tf.layers.concatenate({axis: -1}).apply([mn, mul]);
  const gap = tf.layers.globalAveragePooling2d({}).apply(cat);
  const gate = tf.layers.reshape({targetShape: [1, 1, 4]}).apply(tf.layers.dense({units: 4, activation: 'sigmoid'}).apply(gap));
  const se = tf.layers.multiply().apply([cat, gate]);
  const rows = tf.layers.concatenate({axis: 1}).apply([se, cat]);
  const flat = tf.layers.flatten().apply(rows);
  const d = tf.layers.dense({units: 3}).apply(flat);
  const joined = tf.layers.concatenate().apply([flat, d]);
  const out = tf.layers.dense({units: 3, activation: 'softmax'}).apply(joined);
  return tf.model({inputs: input, outputs: out});
}

// text: a classifier of token ids through the 1-D layers.
function text() {
  const m = tf.sequential();
  m.add(tf.layers.embedding({inputShape: [12], inputDim: 20, outputDim: 6}));
  m.add(tf.layers.conv1d({filters: 8, kernelSize: 3, padding: 'same'}));
  m.add(tf.layers.layerNormalization());
  m.add(tf.layers.activation({activation: 'gelu'}));
  m.add(tf.layers.maxPooling1d({poolSize: 2}));
  m.add(tf.layers.conv1d({filters: 4, kernelSize: 2, padding: 'same', dilationRate: 2, useBias: false}));
  m.add(tf.layers.prelu({sharedAxes: [1]}));
  m.add(tf.layers.averagePooling1d({poolSize: 2, padding: 'same'}));
  m.add(tf.layers.conv1d({filters: 4, kernelSize: 2, strides: 2, activation: 'selu'}));
  m.add(tf.layers.globalMaxPooling1d());
  m.add(tf.layers.dense({units: 6, activation: 'swish'}));
  m.add(tf.layers.leakyReLU({alpha: 0.2}));
  m.add(tf.layers.dense({units: 3, activation: 'softmax'}));
  return m;
}

// series: a sequence of floats (a time series) into Conv1D.
function series() {
  const m = tf.sequential();
  m.add(tf.layers.conv1d({inputShape: [10, 2], filters: 3, kernelSize: 3, activation: 'softplus'}));
  m.add(tf.layers.globalAveragePooling1d());
  m.add(tf.layers.dense({units: 4, activation: 'softsign'}));
  m.add(tf.layers.elu());
  m.add(tf.layers.dense({units: 2, activation: 'softmax'}));
  return m;
}

async function save(name, model, n, scale = 1, ids = 0) { // inputs in [0, scale), or token ids below ids
  const dir = path.join(process.argv[2], name);
  fs.mkdirSync(dir, {recursive: true});
  randomize(model);
  await model.save(tf.io.withSaveHandler(async (a) => {
    const json = {format: 'layers-model', generatedBy: a.generatedBy, convertedBy: a.convertedBy,
      modelTopology: a.modelTopology, weightsManifest: [{paths: ['weights.bin'], weights: a.weightSpecs}]};
    fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(json));
    fs.writeFileSync(path.join(dir, 'weights.bin'), Buffer.from(a.weightData));
    return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
  }));
  const shape = [n, ...model.inputs[0].shape.slice(1)];
  const size = shape.reduce((a, b) => a * b, 1);
  const x = new Float32Array(size);
  for (let i = 0; i < size; i++) x[i] = ids > 0 ? Math.floor(ids * rand()) : scale * rand();
  const y = model.predict(tf.tensor(x, shape));
  const p = await y.data();
  fs.writeFileSync(path.join(dir, 'inputs.bin'), Buffer.from(x.buffer));
  fs.writeFileSync(path.join(dir, 'predictions.bin'), Buffer.from(new Float32Array(p).buffer));
  fs.writeFileSync(path.join(dir, 'meta.json'), JSON.stringify({inputs: shape, outputs: y.shape}));
}

(async () => {
  await tf.setBackend('cpu');
  await save('cnn', cnn(), 5);
  await save('residual', residual(), 4);
  await save('mlp', mlp(), 6);
  await save('mobile', mobile(), 4, 255); // pixels, which its Rescaling takes
  await save('merges', merges(), 4);
  await save('text', text(), 5, 1, 20);
  await save('series', series(), 4);
})().catch((e) => { console.error(e); process.exit(1); });
