// gen_compile.js writes the TensorFlow.js fixtures of recorded compile
// settings (see README.md) as tfjs-layers' model.save writes them with
// includeOptimizer: "trainingConfig" beside "modelTopology":
//
//   node gen_compile.js [DIR]
//
// with @tensorflow/tfjs on NODE_PATH (or in ./node_modules). The weights
// are left out (no "weightsManifest"): the tests read the settings.
//
//   compile_adam_tfjs_model.json      Adam 0.002, categorical_crossentropy
//   compile_nesterov_tfjs_model.json  Momentum 0.05, 0.9, useNesterov,
//                                     sparse_categorical_crossentropy
//   compile_rmsprop_mse_tfjs_model.json RMSProp 0.01, mean_squared_error
//
// each on a flatten and dense 10 softmax over 28×28×1.
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

async function save(file, compile) {
  const m = tf.sequential();
  m.add(tf.layers.flatten({inputShape: [28, 28, 1]}));
  m.add(tf.layers.dense({units: 10, activation: 'softmax'}));
  m.compile(compile);
  await m.save(tf.io.withSaveHandler(async (art) => {
    const json = {format: art.format, generatedBy: art.generatedBy, convertedBy: art.convertedBy,
      modelTopology: art.modelTopology, trainingConfig: art.trainingConfig};
    fs.writeFileSync(path.join(dir, file), JSON.stringify(json, null, 1) + '\n');
    console.log('wrote', file);
    return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
  }), {includeOptimizer: true});
}

(async () => {
  await save('compile_adam_tfjs_model.json', {optimizer: tf.train.adam(0.002), loss: 'categoricalCrossentropy', metrics: ['accuracy']});
  await save('compile_nesterov_tfjs_model.json', {optimizer: tf.train.momentum(0.05, 0.9, true), loss: 'sparseCategoricalCrossentropy'});
  await save('compile_rmsprop_mse_tfjs_model.json', {optimizer: tf.train.rmsprop(0.01), loss: 'meanSquaredError'});
})();
