import{a as r,b as e}from"./chunk-S2SV4DS7.mjs";import"./chunk-MWUZ53VY.mjs";import"./chunk-V3YWWTDH.mjs";export{r as RadarModule,e as createRadarServices};
