// WGSL sources are imported as strings: by tools/node-loader.js in Node and by the wgsl plugin in Vite.
declare module '*.wgsl' {
  const source: string;
  export default source;
}

// YAML config layers (examples/*.yaml) are imported as strings the same way.
declare module '*.yaml' {
  const source: string;
  export default source;
}
